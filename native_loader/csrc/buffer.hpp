// A heap block owned by a shared_ptr: the bytes of one result, written in place by the transfers
// and handed to Python without a copy.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nl {

// Blocks from this size up are 2 MiB aligned and asked for transparent huge pages: a 64 MiB
// result then takes 32 page faults instead of 16,384 when the transfers first write it (perf
// put 55% of the reader's CPU on 64 MiB objects in those faults; docs/benchmarks.md).
constexpr size_t HUGE_PAGE = size_t{2} << 20;

// Large blocks freed by results the consumer dropped are kept (up to this many bytes per
// process) and reused by the next large result: the kernel then neither unmaps them nor zeroes
// fresh pages for the next one, which cost ~20% of a core at 2 GB/s of 64 MiB objects.
constexpr size_t POOL_MAX_BYTES = size_t{256} << 20;

struct Storage {
    explicit Storage(size_t n);
    ~Storage();
    Storage(const Storage &) = delete;
    Storage &operator=(const Storage &) = delete;

    uint8_t *data;
    size_t size;
    size_t capacity;  // bytes allocated (a pooled block may be larger than size)
};

}  // namespace nl
