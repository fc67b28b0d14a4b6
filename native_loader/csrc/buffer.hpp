// A heap block owned by a shared_ptr: the bytes of one result, written in place by the transfers
// and handed to Python without a copy.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <new>

namespace nl {

struct Storage {
    explicit Storage(size_t n) : size(n) {
        // malloc of large blocks maps fresh pages: untouched parts of a big object cost no RSS.
        data = static_cast<uint8_t *>(std::malloc(n ? n : 1));
        if (data == nullptr) throw std::bad_alloc();
    }
    ~Storage() { std::free(data); }
    Storage(const Storage &) = delete;
    Storage &operator=(const Storage &) = delete;

    uint8_t *data;
    size_t size;
};

}  // namespace nl
