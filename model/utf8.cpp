#include "model/utf8.h"

#include <array>

namespace flashserve::utf8 {
namespace {

constexpr uint32_t kReplacement = 0xFFFD;

// Allowed range of the second byte for each lead byte, which rules out overlong forms, surrogates
// and code points above U+10FFFF (RFC 3629).
bool second_byte_ok(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return (b & 0xC0) == 0x80;
  }
}

enum class Status { Valid, Invalid, Incomplete };
struct Sequence {
  Status status;
  int len;  // Valid: the character's length. Otherwise: the bytes that began it (at least 1),
            // which count as one bad character, as Unicode's "maximal subpart" practice does.
};

Sequence sequence_at(std::string_view s, size_t pos) {
  auto lead = static_cast<unsigned char>(s[pos]);
  if (lead < 0x80) return {Status::Valid, 1};
  if (lead < 0xC2 || lead > 0xF4) return {Status::Invalid, 1};
  int len = static_cast<int>(char_len(lead));
  for (int i = 1; i < len; ++i) {
    if (pos + i >= s.size()) return {Status::Incomplete, i};
    auto b = static_cast<unsigned char>(s[pos + i]);
    bool ok = i == 1 ? second_byte_ok(lead, b) : (b & 0xC0) == 0x80;
    if (!ok) return {Status::Invalid, i};
  }
  return {Status::Valid, len};
}

uint32_t decode_valid(std::string_view s, size_t pos, int len) {
  auto lead = static_cast<unsigned char>(s[pos]);
  if (len == 1) return lead;
  uint32_t cp = lead & (0x7F >> len);
  for (int i = 1; i < len; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + i]) & 0x3F);
  return cp;
}

bool is_printable_gpt2_byte(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Gpt2Tables {
  std::array<std::string, 256> byte_to_char;
  std::array<int, 512> char_to_byte;  // every mapped code point is below U+0144
  Gpt2Tables() {
    char_to_byte.fill(-1);
    uint32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      uint32_t cp = is_printable_gpt2_byte(b) ? static_cast<uint32_t>(b) : next_extra++;
      append(byte_to_char[b], cp);
      char_to_byte[cp] = b;
    }
  }
};

const Gpt2Tables& gpt2_tables() {
  static const Gpt2Tables tables;
  return tables;
}

}  // namespace

size_t char_len(unsigned char lead) {
  if (lead >= 0xF0 && lead <= 0xF7) return 4;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xC0 && lead <= 0xDF) return 2;
  return 1;
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t next(std::string_view s, size_t& pos) {
  Sequence seq = sequence_at(s, pos);
  uint32_t cp = seq.status == Status::Valid ? decode_valid(s, pos, seq.len) : kReplacement;
  pos += seq.len;
  return cp;
}

std::string take_complete(std::string& pending, bool final) {
  std::string out;
  size_t pos = 0;
  while (pos < pending.size()) {
    Sequence seq = sequence_at(pending, pos);
    if (seq.status == Status::Incomplete && !final) break;
    if (seq.status == Status::Valid) {
      out.append(pending, pos, seq.len);
    } else {
      append(out, kReplacement);
    }
    pos += seq.len;
  }
  pending.erase(0, pos);
  return out;
}

const std::string& byte_to_gpt2(uint8_t b) { return gpt2_tables().byte_to_char[b]; }

int gpt2_to_byte(uint32_t cp) {
  const auto& map = gpt2_tables().char_to_byte;
  return cp < map.size() ? map[cp] : -1;
}

}  // namespace flashserve::utf8
