// cpp-httplib as a parser, router and response writer over bytes we already hold: our event loop
// owns every socket (so no connection holds a thread), frames a whole request, and hands it here.
// A handler may take the exchange over (`defer`) to answer later, from engine events, without
// holding the thread that ran it. Only http_*.cpp include this.
#pragma once
#include <httplib.h>

#include <memory>
#include <string>
#include "server/http_exchange.h"

namespace flashserve {

class HttpRouter : public httplib::Server {
 public:
  // `request` is one complete request with a Content-Length body (see RequestFramer).
  RoutedResponse handle(const std::string& request, const ExchangeInfo& info);

  // For handlers, on the thread running handle(): the exchange being handled, with `closing` also
  // set when the client asked to close.
  static const ExchangeInfo& exchange();
  // Takes this exchange over: httplib's own response is discarded; `deferred` answers instead.
  static void defer(std::unique_ptr<DeferredResponse> deferred);
};

}  // namespace flashserve
