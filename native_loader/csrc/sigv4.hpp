// AWS Signature Version 4 (header form) over OpenSSL SHA-256 / HMAC.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace nl {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct SigningCredentials {
    std::string access_key;
    std::string secret_key;
    std::string session_token;  // empty: none
};

struct SignInput {
    std::string method;           // "GET", "HEAD", ...
    std::string canonical_uri;    // encoded path exactly as sent (S3 does not normalise it)
    std::string raw_query;        // encoded query exactly as sent
    std::string host;             // Host header value
    Headers headers;              // extra headers to sign (any case; host/x-amz-date are added)
    std::string payload_hash;     // e.g. "UNSIGNED-PAYLOAD"; sent as x-amz-content-sha256
    std::string amz_date;         // yyyymmddThhmmssZ
    std::string region;
    std::string service;          // "s3"
};

extern const char *const UNSIGNED_PAYLOAD;

// Current UTC time as yyyymmddThhmmssZ.
std::string amz_date_now();

std::string sha256_hex(const std::string &data);

// Headers to add to the request: x-amz-date, x-amz-content-sha256, x-amz-security-token (when a
// session token is set) and authorization. The secret never leaves this function.
Headers sigv4_sign(const SignInput &in, const SigningCredentials &creds);

}  // namespace nl
