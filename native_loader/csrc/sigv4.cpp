// AWS Signature Version 4 (header form) over OpenSSL SHA-256 / HMAC.
#include "sigv4.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>
#include <stdexcept>

#include "url.hpp"

namespace nl {

const char *const UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD";

namespace {

std::string to_hex(const unsigned char *data, size_t n) {
    static const char *hex = "0123456789abcdef";
    std::string out(n * 2, '0');
    for (size_t i = 0; i < n; ++i) {
        out[2 * i] = hex[data[i] >> 4];
        out[2 * i + 1] = hex[data[i] & 0xF];
    }
    return out;
}

std::string hmac_sha256(const std::string &key, const std::string &data) {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
             reinterpret_cast<const unsigned char *>(data.data()), data.size(), out,
             &len) == nullptr) {
        throw std::runtime_error("HMAC-SHA256 failed");
    }
    return std::string(reinterpret_cast<char *>(out), len);
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

// Trimall: strip, and collapse every run of whitespace to one space.
std::string trim_all(const std::string &value) {
    std::string out;
    bool pending_space = false;
    for (unsigned char c : value) {
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
            pending_space = !out.empty();
            continue;
        }
        if (pending_space) out += ' ';
        pending_space = false;
        out += static_cast<char>(c);
    }
    return out;
}

}  // namespace

std::string amz_date_now() {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
    return buf;
}

std::string sha256_hex(const std::string &data) {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char *>(data.data()), data.size(), digest);
    return to_hex(digest, sizeof digest);
}

Headers sigv4_sign(const SignInput &in, const SigningCredentials &creds) {
    if (in.amz_date.size() < 8) throw std::invalid_argument("amz_date must be yyyymmddThhmmssZ");
    Headers added;
    added.emplace_back("x-amz-date", in.amz_date);
    if (!in.payload_hash.empty()) added.emplace_back("x-amz-content-sha256", in.payload_hash);
    if (!creds.session_token.empty()) added.emplace_back("x-amz-security-token", creds.session_token);

    // Lower-case names; repeated names are joined with ',' in their given order.
    std::map<std::string, std::string> canon;
    auto add = [&canon](const std::string &name, const std::string &value) {
        std::string key = lower(name);
        auto it = canon.find(key);
        if (it == canon.end()) canon.emplace(key, trim_all(value));
        else it->second += "," + trim_all(value);
    };
    for (const auto &[name, value] : in.headers) {
        std::string key = lower(name);
        if (key == "authorization" || key == "x-amz-date" || key == "x-amz-security-token" ||
            (key == "x-amz-content-sha256" && !in.payload_hash.empty()))
            continue;  // replaced by ours, as botocore does
        add(name, value);
    }
    for (const auto &[name, value] : added) add(name, value);
    if (canon.find("host") == canon.end()) canon.emplace("host", in.host);

    std::string canonical_headers;
    std::string signed_headers;
    for (const auto &[name, value] : canon) {
        canonical_headers += name + ":" + value + "\n";
        if (!signed_headers.empty()) signed_headers += ';';
        signed_headers += name;
    }
    std::string payload = in.payload_hash;
    if (payload.empty()) {
        auto it = canon.find("x-amz-content-sha256");
        payload = it != canon.end() ? it->second : sha256_hex("");
    }
    std::string canonical_request = in.method + "\n" + in.canonical_uri + "\n" +
                                    canonical_query(in.raw_query) + "\n" + canonical_headers +
                                    "\n" + signed_headers + "\n" + payload;
    std::string date = in.amz_date.substr(0, 8);
    std::string scope = date + "/" + in.region + "/" + in.service + "/aws4_request";
    std::string string_to_sign = "AWS4-HMAC-SHA256\n" + in.amz_date + "\n" + scope + "\n" +
                                 sha256_hex(canonical_request);
    std::string key = hmac_sha256("AWS4" + creds.secret_key, date);
    key = hmac_sha256(key, in.region);
    key = hmac_sha256(key, in.service);
    key = hmac_sha256(key, "aws4_request");
    std::string raw_signature = hmac_sha256(key, string_to_sign);
    std::string signature = to_hex(reinterpret_cast<const unsigned char *>(raw_signature.data()),
                                   raw_signature.size());
    added.emplace_back("authorization", "AWS4-HMAC-SHA256 Credential=" + creds.access_key + "/" +
                                            scope + ", SignedHeaders=" + signed_headers +
                                            ", Signature=" + signature);
    return added;
}

}  // namespace nl
