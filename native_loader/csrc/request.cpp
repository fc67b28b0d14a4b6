// Building one HTTP request: see request.hpp.
#include "request.hpp"

#include <algorithm>
#include <cmath>

#include "s3.hpp"

namespace nl {

namespace {

// Virtual hosting needs a DNS label: dots (TLS wildcards), upper case or '_' force path style.
bool is_dns_label(const std::string &bucket) {
    return !bucket.empty() && std::all_of(bucket.begin(), bucket.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    });
}

}  // namespace

HttpRequest build_request(const RequestInput &in, const EngineConfig &config,
                          const UrlParts &endpoint, const SigningCredentials &creds,
                          const std::string &amz_date) {
    HttpRequest req;
    req.method = in.kind == RequestKind::Head ? "HEAD" : "GET";
    req.nobody = in.kind == RequestKind::Head;
    bool path_style = config.path_style || !is_dns_label(in.bucket);
    RequestTarget target = make_target(endpoint, path_style, in.bucket,
                                       in.kind == RequestKind::List ? "" : in.key, in.query);
    req.url = std::move(target.url);
    if (in.kind == RequestKind::Get) {
        req.headers.emplace_back("range", "bytes=" + std::to_string(in.start) + "-" +
                                              std::to_string(in.start + in.len - 1));
        if (!in.first && !in.etag.empty()) req.headers.emplace_back("if-match", in.etag);
    }
    if (!config.unsigned_requests) {
        SignInput sign;
        sign.method = req.method;
        sign.canonical_uri = target.canonical_uri;
        sign.raw_query = target.raw_query;
        sign.host = target.host;
        sign.headers = req.headers;
        sign.payload_hash = UNSIGNED_PAYLOAD;
        sign.amz_date = amz_date;
        sign.region = config.region;
        sign.service = "s3";
        for (auto &h : sigv4_sign(sign, creds)) req.headers.push_back(std::move(h));
    }
    req.connect_timeout_ms = static_cast<long>(std::ceil(config.connect_timeout_s * 1000));
    req.low_speed_time_s = static_cast<long>(
        std::ceil(std::max(config.first_byte_timeout_s, config.stall_timeout_s) +
                  config.connect_timeout_s + 1));
    return req;
}

}  // namespace nl
