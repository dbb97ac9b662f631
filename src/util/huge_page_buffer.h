// Large read-mostly buffers (repacked weights) on 2 MiB transparent huge pages.
//
// Decoding streams every weight once a token. On 4 KiB pages that is a TLB miss, a page
// walk and a stop of the hardware prefetcher every 4 KiB; on 2 MiB pages it is 512 times
// fewer. The kernel's default THP mode on Debian is "madvise", so the buffer asks for it.
// Where huge pages are unavailable the buffer is still valid, on ordinary pages;
// BRISK_NO_HUGE_PAGES=1 asks for ordinary pages (for A/B measurements).
#pragma once
#include <cstddef>
#include <cstdint>

namespace brisk {

class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  explicit HugePageBuffer(size_t bytes);  // zero-filled; throws brisk::Error when out of memory
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& o) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& o) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;  // 2 MiB aligned when at least 2 MiB
  size_t size_ = 0;
  size_t mapped_ = 0;        // bytes mapped at data_ (size rounded up)
};

}  // namespace brisk
