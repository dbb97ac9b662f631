#include "util/huge_page_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "util/error.h"

namespace brisk {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}

HugePageBuffer::HugePageBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  const bool huge = bytes >= kHugePage && !std::getenv("BRISK_NO_HUGE_PAGES");
  const size_t want = huge ? (bytes + kHugePage - 1) / kHugePage * kHugePage : bytes;
  // Map one huge page more, then cut the unaligned head and the tail away.
  const size_t span = huge ? want + kHugePage : want;
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail("cannot allocate {} bytes: {}", bytes, std::strerror(errno));
  auto* base = static_cast<uint8_t*>(p);
  uint8_t* aligned = base;
  if (huge) {
    aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base) + kHugePage - 1) & ~(kHugePage - 1));
    if (aligned > base) ::munmap(base, aligned - base);
    if (base + span > aligned + want) ::munmap(aligned + want, base + span - (aligned + want));
    ::madvise(aligned, want, MADV_HUGEPAGE);  // advice only: ordinary pages if refused
  }
  data_ = aligned;
  mapped_ = want;
}

HugePageBuffer::~HugePageBuffer() {
  if (data_) ::munmap(data_, mapped_);
}

HugePageBuffer::HugePageBuffer(HugePageBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), mapped_(std::exchange(o.mapped_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(data_, mapped_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
  }
  return *this;
}

}  // namespace brisk
