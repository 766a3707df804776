// The end every request fuzz target shares: one body parsed (and taken on from there) by `run`. An
// ApiError with a 400 or 404 is the answer to a bad body, built as the server would send it
// (`error_json`); anything else escaping (a json::exception, std::out_of_range, ...) is a finding,
// since the server would answer it with a 500.
#pragma once
#include <exception>

#include "server/openai_json.h"
#include "tests/fuzz/finding.h"

namespace flashserve::fuzz {

template <typename Run, typename ErrorJson>
void answer_request(const char* target, Run run, ErrorJson error_json) {
  try {
    run();
  } catch (const ApiError& e) {
    if (e.status != 400 && e.status != 404) finding(target, "an ApiError that is not a 400 or 404", e.what());
    error_json(e).dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (const std::exception& e) {
    finding(target, "an exception other than ApiError escaped", e.what());
  }
}

}  // namespace flashserve::fuzz
