// HTTP/1.1 responses written as bytes, for the answers that do not go through httplib: those the
// event loop gives itself (timeouts, overload, limits) and deferred generation responses.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flashserve {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// A whole response with a Content-Length body.
std::string http_response(int status, std::string_view content_type, std::string_view body, const HeaderList& headers,
                          bool close);
// The head of a chunked response; the body follows as http_chunk()s and http_last_chunk().
std::string http_chunked_head(int status, std::string_view content_type, const HeaderList& headers, bool close);
std::string http_chunk(std::string_view data);  // empty data gives nothing (a zero chunk would end the body)
std::string_view http_last_chunk();
std::string_view http_status_text(int status);

}  // namespace flashserve
