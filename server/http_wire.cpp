#include "server/http_wire.h"

#include <cstdio>

namespace flashserve {
namespace {

std::string head(int status, std::string_view content_type, const HeaderList& headers, bool close) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " ";
  h += http_status_text(status);
  h += "\r\nContent-Type: ";
  h += content_type;
  h += "\r\n";
  for (const auto& [name, value] : headers) h += name + ": " + value + "\r\n";
  h += close ? "Connection: close\r\n" : "Connection: keep-alive\r\n";
  return h;
}

}  // namespace

std::string http_response(int status, std::string_view content_type, std::string_view body, const HeaderList& headers,
                          bool close) {
  std::string r = head(status, content_type, headers, close);
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  r += body;
  return r;
}

std::string http_chunked_head(int status, std::string_view content_type, const HeaderList& headers, bool close) {
  return head(status, content_type, headers, close) + "Transfer-Encoding: chunked\r\n\r\n";
}

std::string http_chunk(std::string_view data) {
  if (data.empty()) return {};
  char size[24];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string c = size;
  c += data;
  c += "\r\n";
  return c;
}

std::string_view http_last_chunk() { return "0\r\n\r\n"; }

std::string_view http_status_text(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
  }
  return "Unknown";
}

}  // namespace flashserve
