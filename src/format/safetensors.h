// safetensors files (Hugging Face weights): an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then raw data.
// Tensors are mapped in place; shapes are reversed into GGUF order (PyTorch [out, in]
// becomes ne = {in, out}), names are kept as in the file.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor_view.h"
#include "util/mapped_file.h"

namespace brisk {

class SafetensorsFile {
 public:
  // Maps and validates the file: header length, JSON, every dtype (F32, F16, BF16),
  // shape (1..4 dims, all > 0) and data_offsets (inside the data section, size equal to
  // shape x dtype). Throws brisk::Error naming the file, tensor and what is wrong.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);
  // Same, over bytes in memory that must outlive the result.
  static std::shared_ptr<SafetensorsFile> parse(const uint8_t* bytes, size_t size,
                                                std::string name = "<memory>");

  const std::map<std::string, std::string>& metadata() const { return meta_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }  // in data order
  const TensorView* find(std::string_view name) const;
  size_t data_offset() const { return data_offset_; }  // 8 + header length
  const std::string& path() const { return path_; }
  const std::shared_ptr<MappedFile>& mapping() const { return map_; }

 private:
  std::shared_ptr<MappedFile> map_;
  std::string path_;
  size_t data_offset_ = 0;
  std::map<std::string, std::string> meta_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace brisk
