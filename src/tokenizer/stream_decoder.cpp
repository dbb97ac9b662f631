#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace brisk {

namespace {

const char* const kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Moves the complete characters at the front of `pending` to the result; a byte that
// can never start a valid character becomes U+FFFD; an unfinished character at the
// end stays unless `all`, in which case it too becomes U+FFFD (one per byte).
std::string take(std::string& pending, bool all) {
  std::string out;
  size_t i = 0;
  while (i < pending.size()) {
    const size_t n = unicode::valid_utf8_len(pending, i);
    if (n > 0) {
      out.append(pending, i, n);
      i += n;
    } else if (!all && unicode::is_utf8_prefix(pending, i)) {
      break;
    } else {
      out += kReplacement;
      ++i;
    }
  }
  pending.erase(0, i);
  return out;
}

}  // namespace

std::string StreamDecoder::push(int32_t id) {
  pending_ += tok_.token_to_piece(id);
  return take(pending_, false);
}

std::string StreamDecoder::flush() { return take(pending_, true); }

}  // namespace brisk
