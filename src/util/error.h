// Errors: brisk reports bad input by throwing brisk::Error with a message that says
// what failed, where (file, key, tensor, offset) and why (expected vs found).
// The command-line front end catches it, prints it and exits non-zero.
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace brisk {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace brisk
