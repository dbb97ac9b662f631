// A read-only memory map of a whole file; model weights are used in place from it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace brisk {

class MappedFile {
 public:
  // Throws brisk::Error naming the path and the OS reason when the file cannot be mapped.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Tells the kernel that the whole pages inside [p, p + n) will not be read again soon
// (MADV_PAGEOUT), so it reclaims them now: clean file pages leave the resident set at
// once. Nothing is lost for any kind of memory (a later read faults the data back in);
// a kernel without MADV_PAGEOUT ignores it.
void advise_pageout(const void* p, size_t n);

}  // namespace brisk
