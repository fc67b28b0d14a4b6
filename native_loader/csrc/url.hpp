// URI encoding and URL splitting shared by the signer and the S3 request builder.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace nl {

// RFC 3986 percent-encoding as SigV4 wants it: unreserved characters (A-Z a-z 0-9 - _ . ~) stay,
// everything else becomes %XX (upper-case hex). With keep_slash, '/' stays (object key paths).
std::string uri_encode(const std::string &in, bool keep_slash);

// Decodes %XX sequences; leaves malformed sequences as they are. '+' is not a space.
std::string percent_decode(const std::string &in);

// Decodes the five predefined XML entities and numeric character references (&#NN; &#xNN;).
std::string xml_unescape(const std::string &in);

struct UrlParts {
    std::string scheme;  // "http" | "https"
    std::string host;    // lower-case host name, without port
    int port = -1;       // -1 when the URL gives none
    std::string path;    // raw (already encoded) path, "/" when empty
    std::string query;   // raw query string after '?', without '#fragment'

    // Host header value: host plus port unless it is the scheme's default port.
    std::string host_header() const;
    // scheme://host[:port]
    std::string origin() const;
};

// Splits an absolute http(s) URL. Returns false when it is not one.
bool split_url(const std::string &url, UrlParts &out);

// Canonical SigV4 query string from an already-encoded raw query: pairs sorted by name, then
// value, each written as name=value ('=' always present).
std::string canonical_query(const std::string &raw_query);

// Builds an encoded query string from (name, value) pairs in the given order.
std::string build_query(const std::vector<std::pair<std::string, std::string>> &params);

}  // namespace nl
