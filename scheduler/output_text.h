// A request's generated text as it grows token by token: cut only at UTF-8 boundaries, and with stop
// strings matched across token boundaries. Text that could still turn into a stop string is held
// back until it can't; a matched stop string and anything after it is never released.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "model/tokenizer.h"

namespace flashserve {

class OutputText {
 public:
  OutputText(const Tokenizer& tok, std::vector<std::string> stop);

  struct Delta {
    std::string text;                 // newly released text (possibly empty)
    std::optional<std::string> stop;  // the stop string that matched; text ends right before it
  };
  Delta push(int32_t token);
  // At the end of generation (not after a stop): whatever is still held back.
  std::string flush();

 private:
  StreamDecoder decoder_;
  std::vector<std::string> stop_;
  size_t max_stop_len_ = 0;
  std::string held_;  // decoded but not yet released
};

}  // namespace flashserve
