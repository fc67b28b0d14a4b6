// A heap block owned by a shared_ptr: the bytes of one result, written in place by the transfers
// and handed to Python without a copy.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>

namespace nl {

// Blocks from this size up are 2 MiB aligned and asked for transparent huge pages: a 64 MiB
// result then takes 32 page faults instead of 16,384 when the transfers first write it (perf
// put 55% of the reader's CPU on 64 MiB objects in those faults; docs/benchmarks.md).
constexpr size_t HUGE_PAGE = size_t{2} << 20;

struct Storage {
    explicit Storage(size_t n) : size(n) {
        if (n >= HUGE_PAGE) {
            const size_t rounded = (n + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
            data = static_cast<uint8_t *>(std::aligned_alloc(HUGE_PAGE, rounded));
            if (data != nullptr) madvise(data, rounded, MADV_HUGEPAGE);  // a hint: may be refused
        } else {
            // malloc of large blocks maps fresh pages: untouched parts cost no RSS.
            data = static_cast<uint8_t *>(std::malloc(n ? n : 1));
        }
        if (data == nullptr) throw std::bad_alloc();
    }
    ~Storage() { std::free(data); }
    Storage(const Storage &) = delete;
    Storage &operator=(const Storage &) = delete;

    uint8_t *data;
    size_t size;
};

}  // namespace nl
