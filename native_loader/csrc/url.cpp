// URI encoding and URL splitting shared by the signer and the S3 request builder.
#include "url.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace nl {

namespace {

bool is_unreserved(unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

void append_utf8(std::string &out, unsigned long cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

}  // namespace

std::string uri_encode(const std::string &in, bool keep_slash) {
    static const char *hex = "0123456789ABCDEF";
    std::string out;
    out.reserve(in.size() * 3);
    for (unsigned char c : in) {
        if (is_unreserved(c) || (keep_slash && c == '/')) {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 0xF];
        }
    }
    return out;
}

std::string percent_decode(const std::string &in) {
    std::string out;
    out.reserve(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] == '%' && i + 2 < in.size()) {
            int hi = hex_value(in[i + 1]);
            int lo = hex_value(in[i + 2]);
            if (hi >= 0 && lo >= 0) {
                out += static_cast<char>(hi * 16 + lo);
                i += 2;
                continue;
            }
        }
        out += in[i];
    }
    return out;
}

std::string xml_unescape(const std::string &in) {
    std::string out;
    out.reserve(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] != '&') {
            out += in[i];
            continue;
        }
        size_t semi = in.find(';', i);
        if (semi == std::string::npos || semi - i > 12) {
            out += in[i];
            continue;
        }
        std::string name = in.substr(i + 1, semi - i - 1);
        if (name == "amp") out += '&';
        else if (name == "lt") out += '<';
        else if (name == "gt") out += '>';
        else if (name == "quot") out += '"';
        else if (name == "apos") out += '\'';
        else if (name.size() > 1 && name[0] == '#') {
            char *end = nullptr;
            unsigned long cp = (name[1] == 'x' || name[1] == 'X')
                                   ? std::strtoul(name.c_str() + 2, &end, 16)
                                   : std::strtoul(name.c_str() + 1, &end, 10);
            if (end == nullptr || *end != '\0' || cp > 0x10FFFF) {
                out += in[i];
                continue;
            }
            append_utf8(out, cp);
        } else {
            out += in[i];
            continue;
        }
        i = semi;
    }
    return out;
}

std::string UrlParts::host_header() const {
    bool default_port = port < 0 || (scheme == "http" && port == 80) ||
                        (scheme == "https" && port == 443);
    return default_port ? host : host + ":" + std::to_string(port);
}

std::string UrlParts::origin() const {
    return scheme + "://" + host + (port < 0 ? "" : ":" + std::to_string(port));
}

bool split_url(const std::string &url, UrlParts &out) {
    size_t sep = url.find("://");
    if (sep == std::string::npos) return false;
    out.scheme = url.substr(0, sep);
    std::transform(out.scheme.begin(), out.scheme.end(), out.scheme.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (out.scheme != "http" && out.scheme != "https") return false;
    size_t start = sep + 3;
    size_t end = url.find_first_of("/?#", start);
    std::string authority = url.substr(start, end == std::string::npos ? std::string::npos
                                                                        : end - start);
    size_t at = authority.rfind('@');
    if (at != std::string::npos) authority = authority.substr(at + 1);
    size_t colon = authority.rfind(':');
    size_t bracket = authority.rfind(']');
    out.port = -1;
    if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
        std::string port = authority.substr(colon + 1);
        authority = authority.substr(0, colon);
        if (!port.empty()) {
            if (!std::all_of(port.begin(), port.end(), ::isdigit) || port.size() > 5) return false;
            out.port = std::stoi(port);
        }
    }
    if (authority.empty()) return false;
    std::transform(authority.begin(), authority.end(), authority.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    out.host = authority;
    out.path = "/";
    out.query.clear();
    if (end == std::string::npos) return true;
    std::string rest = url.substr(end);
    size_t hash = rest.find('#');
    if (hash != std::string::npos) rest = rest.substr(0, hash);
    size_t q = rest.find('?');
    std::string path = q == std::string::npos ? rest : rest.substr(0, q);
    if (!path.empty()) out.path = path;
    if (q != std::string::npos) out.query = rest.substr(q + 1);
    return true;
}

std::string canonical_query(const std::string &raw_query) {
    if (raw_query.empty()) return "";
    std::vector<std::pair<std::string, std::string>> pairs;
    size_t pos = 0;
    while (pos <= raw_query.size()) {
        size_t amp = raw_query.find('&', pos);
        std::string item = raw_query.substr(pos, amp == std::string::npos ? std::string::npos
                                                                           : amp - pos);
        size_t eq = item.find('=');
        if (eq == std::string::npos) pairs.emplace_back(item, "");
        else pairs.emplace_back(item.substr(0, eq), item.substr(eq + 1));
        if (amp == std::string::npos) break;
        pos = amp + 1;
    }
    std::sort(pairs.begin(), pairs.end());
    std::string out;
    for (const auto &[name, value] : pairs) {
        if (!out.empty()) out += '&';
        out += name + "=" + value;
    }
    return out;
}

std::string build_query(const std::vector<std::pair<std::string, std::string>> &params) {
    std::string out;
    for (const auto &[name, value] : params) {
        if (!out.empty()) out += '&';
        out += uri_encode(name, false) + "=" + uri_encode(value, false);
    }
    return out;
}

}  // namespace nl
