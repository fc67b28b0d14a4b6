// The client-side send-rate limiter of adaptive retries: a token bucket that is off until the
// endpoint throttles (503 SlowDown, 429, Throttling...), then cuts the send rate by BETA and
// lets it grow back along a cubic curve (CUBIC, RFC 8312), as the AWS SDKs' adaptive retry mode
// does. What differs from the SDKs' version:
// - a cut starts from the lower of the rates sent and answered with success lately: what got
//   through is this client's share of the limit (a client that sent 3x the limit and cut to
//   0.7x of that would still send 2x);
// - a throttle cuts at most once per round trip (answers to requests sent before a cut say
//   nothing about the rate after it) and per CUT_INTERVAL_S, so a burst of 503s on many
//   requests in flight is one cut, not 0.7^n;
// - the rate is not capped at twice what is being sent: a DataLoader worker waits for its
//   siblings (batches are taken from workers in turn) and between epochs, and a cap learnt
//   while it waited throttled its next burst far below the limit (docs/benchmarks.md,
//   "Throttling");
// - CUBIC's constant is not scaled with the rate: growth that is proportional to the rate
//   keeps the ratio between processes, and ranks that started unequal stayed unequal;
// - past the rate of the last cut with no throttle since, the rate may also double every
//   DOUBLING_S, and after QUIET_S without a cut, once it is twice what is being sent, the
//   limiter turns itself off, so a storm that ended leaves nothing slow behind.
// Pure: the caller passes the time, so tests need no clock. Used under the engine's lock.
#pragma once

#include <atomic>
#include <cstdint>

#include "engine_types.hpp"

namespace nl {

class RateLimiter {
public:
    static constexpr double BETA = 0.7;          // rate kept on a throttle
    static constexpr double SCALE = 0.4;         // CUBIC's C, in requests/s per s^3
    static constexpr double MIN_RATE = 0.5;      // requests/s never cut below
    static constexpr double MAX_RATE = 1e9;      // requests/s the curve stops at
    static constexpr double BURST_S = 0.1;       // seconds of the rate saved up (>= 1 token)
    static constexpr double MEASURE_S = 0.5;     // bucket of the measured send rate
    static constexpr double SMOOTH = 0.8;        // weight of the newest bucket
    static constexpr double RELEASE_FACTOR = 2;  // off again once the rate is this above demand
    static constexpr double CUT_INTERVAL_S = 0.1;  // at most one cut in this long
    static constexpr double DOUBLING_S = 0.25;   // past the last cut, no throttle: doubling
    static constexpr double QUIET_S = 5.0;       // no cut for this long before turning off

    // Whether a request may be sent now; takes a token if so. Counts the send.
    bool try_acquire(Clock::time_point now);
    // When the next token is due (now when the limiter is off or a token is there).
    Clock::time_point next_token(Clock::time_point now) const;
    // A request sent at `sent` was throttled: cut the rate, at most once per round trip (a
    // throttle of a request sent before the last cut was caused by the rate before it) and once
    // per CUT_INTERVAL_S (a burst of 503s is one event).
    // Whether it cut.
    bool on_throttle(Clock::time_point now, Clock::time_point sent);
    // A request succeeded: grow the rate along the cubic curve.
    void on_success(Clock::time_point now);

    bool enabled() const { return enabled_; }
    double rate() const { return enabled_ ? fill_rate_ : 0.0; }  // requests/s; 0: not limiting
    int64_t cuts() const { return cuts_; }
    double measured_rate(Clock::time_point now) const;  // requests/s sent lately
    double success_rate(Clock::time_point now) const;   // requests/s that succeeded lately

private:
    void refill(Clock::time_point now);
    void measure(Clock::time_point now);

    bool enabled_ = false;
    double fill_rate_ = 0.0;
    double tokens_ = 0.0;
    Clock::time_point stamp_{};
    double last_max_rate_ = 0.0;
    double k_ = 0.0;  // seconds from a cut back to last_max_rate_
    Clock::time_point last_cut_{};
    int64_t cuts_ = 0;
    // The measured send and success rates: counted per MEASURE_S bucket, smoothed.
    Clock::time_point bucket_start_{};
    int64_t bucket_sends_ = 0;
    int64_t bucket_successes_ = 0;
    bool measured_any_ = false;  // a bucket has finished
    double measured_ = 0.0;
    double succeeded_ = 0.0;
};

// One RateLimiter shared by the processes that map the same memory (a DataLoader's workers
// forked from the process that created it), so they slow down as one client instead of as
// many. Lives in zero-filled shared memory; every use takes its spinlock (a few hundred
// nanoseconds of bookkeeping, never a system call inside). A process that cannot get the lock
// for SPIN_LIMIT tries (one died holding it) uses its own limiter from then on.
struct SharedRateLimiter {
    static constexpr uint32_t READY = 0x4c524c31;  // "LRL1"
    static constexpr int SPIN_LIMIT = 1 << 22;

    std::atomic<uint32_t> state;  // 0: fresh, 1: being set up, READY
    std::atomic<uint32_t> lock;
    RateLimiter limiter;

    // The limiter in `memory` (at least sizeof(SharedRateLimiter) bytes, zero-filled when
    // first mapped), set up by whichever process comes first.
    static SharedRateLimiter *attach(void *memory);
    bool try_lock();
    void unlock() { lock.store(0, std::memory_order_release); }
};

// The limiter an engine uses for one call: the shared one under its lock, else its own.
class LimiterAccess {
public:
    LimiterAccess(RateLimiter &own, SharedRateLimiter *&shared);
    ~LimiterAccess();
    LimiterAccess(const LimiterAccess &) = delete;
    LimiterAccess &operator=(const LimiterAccess &) = delete;
    RateLimiter *operator->() { return limiter_; }

private:
    RateLimiter *limiter_;
    SharedRateLimiter *locked_ = nullptr;
};

}  // namespace nl
