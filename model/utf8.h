// UTF-8 helpers shared by the tokenizer, and GPT-2's byte <-> printable-character mapping.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace flashserve::utf8 {

// Length of the character a lead byte announces; 1 for bytes that cannot start one, so that
// splitting arbitrary (possibly invalid) text into characters always makes progress.
size_t char_len(unsigned char lead);

void append(std::string& out, uint32_t cp);

// The code point of the character starting at s[pos], advancing pos past it; an invalid or
// truncated sequence yields U+FFFD and advances past the bytes that began it (at least one).
uint32_t next(std::string_view s, size_t& pos);

// Moves the complete prefix of `pending` to the returned string, with invalid bytes replaced by
// U+FFFD. A trailing sequence that is valid so far but incomplete stays in `pending` unless
// `final`, in which case it also becomes U+FFFD.
std::string take_complete(std::string& pending, bool final);

// GPT-2 byte-level BPE stores every byte as a printable character: bytes that are already
// printable map to themselves, the rest to U+0100 onwards.
const std::string& byte_to_gpt2(uint8_t b);
// The byte a GPT-2 character stands for, or -1 for characters outside the mapping.
int gpt2_to_byte(uint32_t cp);

}  // namespace flashserve::utf8
