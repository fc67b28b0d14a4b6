// Building one HTTP request of one part, as a pure function: the target URL, the headers
// (Range, If-Match, SigV4) and the curl settings derived from the configuration. No curl
// handle is touched here; engine_attempt.cpp applies the result to one.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine_types.hpp"
#include "sigv4.hpp"
#include "url.hpp"

namespace nl {

using Query = std::vector<std::pair<std::string, std::string>>;

// What one attempt asks for. References: the caller's ticket outlives the call.
struct RequestInput {
    RequestKind kind;
    const std::string &bucket;
    const std::string &key;    // ignored for LIST
    const Query &query;        // LIST parameters
    int64_t start = 0;         // GET: absolute byte range [start, start + len)
    int64_t len = 0;
    bool first = true;         // the ticket's first part (it learns the object's size)
    const std::string &etag;   // GET: the ETag later parts must match (empty: not known yet)
};

struct HttpRequest {
    std::string method;
    std::string url;
    Headers headers;              // without curl's defaults; SigV4 ones included when signed
    bool nobody = false;          // HEAD
    long connect_timeout_ms = 0;
    long low_speed_time_s = 0;    // a backstop behind the engine's own timeout checks
};

// amz_date (yyyymmddThhmmssZ) is passed in so the result depends on the arguments only.
HttpRequest build_request(const RequestInput &in, const EngineConfig &config,
                          const UrlParts &endpoint, const SigningCredentials &creds,
                          const std::string &amz_date);

}  // namespace nl
