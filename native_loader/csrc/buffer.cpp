// Storage allocation and the per-process pool of large blocks: see buffer.hpp.
#include "buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace nl {

namespace {

class BlockPool {
public:
    // A pooled block of at least `bytes` and at most a quarter more, or nullptr.
    std::pair<uint8_t *, size_t> take(size_t bytes) {
        if (!usable()) return {nullptr, 0};
        std::lock_guard<std::mutex> lk(mu_);
        size_t best = blocks_.size();
        for (size_t i = 0; i < blocks_.size(); ++i) {
            size_t cap = blocks_[i].second;
            if (cap >= bytes && cap <= bytes + bytes / 4 &&
                (best == blocks_.size() || cap < blocks_[best].second))
                best = i;
        }
        if (best == blocks_.size()) return {nullptr, 0};
        auto block = blocks_[best];
        blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(best));
        pooled_ -= block.second;
        return block;
    }

    // Keeps the block for reuse if it fits under the cap; false: the caller frees it.
    bool give(uint8_t *data, size_t capacity) {
        if (!usable() || capacity > POOL_MAX_BYTES) return false;
        std::lock_guard<std::mutex> lk(mu_);
        // The oldest blocks make room: the newest are the likeliest size of the next result.
        while (!blocks_.empty() && pooled_ + capacity > POOL_MAX_BYTES) {
            std::free(blocks_.front().first);
            pooled_ -= blocks_.front().second;
            blocks_.erase(blocks_.begin());
        }
        blocks_.emplace_back(data, capacity);
        pooled_ += capacity;
        return true;
    }

private:
    // A forked child never touches the pool: the parent's lock may have been held at the fork.
    bool usable() const { return ::getpid() == owner_pid_; }

    const pid_t owner_pid_ = ::getpid();
    std::mutex mu_;
    std::vector<std::pair<uint8_t *, size_t>> blocks_;
    size_t pooled_ = 0;
};

BlockPool &pool() {
    static BlockPool *p = new BlockPool();  // never destroyed: results may outlive statics
    return *p;
}

}  // namespace

Storage::Storage(size_t n) : data(nullptr), size(n), capacity(0) {
    if (n >= HUGE_PAGE) {
        const size_t rounded = (n + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
        auto [block, cap] = pool().take(rounded);
        if (block != nullptr) {
            data = block;
            capacity = cap;
        } else {
            data = static_cast<uint8_t *>(std::aligned_alloc(HUGE_PAGE, rounded));
            capacity = rounded;
            if (data != nullptr) madvise(data, rounded, MADV_HUGEPAGE);  // a hint: may be refused
        }
    } else {
        // malloc of large blocks maps fresh pages: untouched parts cost no RSS.
        data = static_cast<uint8_t *>(std::malloc(n ? n : 1));
        capacity = n;
    }
    if (data == nullptr) throw std::bad_alloc();
}

Storage::~Storage() {
    if (capacity >= HUGE_PAGE && pool().give(data, capacity)) return;
    std::free(data);
}

}  // namespace nl
