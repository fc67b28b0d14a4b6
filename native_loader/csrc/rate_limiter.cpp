// The adaptive send-rate limiter: see rate_limiter.hpp.
#include "rate_limiter.hpp"

#include <algorithm>
#include <cmath>
#include <new>
#include <thread>

namespace nl {

namespace {

double capacity(double rate) { return std::max(1.0, rate * RateLimiter::BURST_S); }

}  // namespace

void RateLimiter::measure(Clock::time_point now) {
    if (bucket_start_ == Clock::time_point{}) bucket_start_ = now;
    double elapsed = seconds_since(bucket_start_, now);
    if (elapsed < MEASURE_S) return;
    double rate = static_cast<double>(bucket_sends_) / elapsed;
    double ok = static_cast<double>(bucket_successes_) / elapsed;
    measured_ = !measured_any_ ? rate : SMOOTH * rate + (1 - SMOOTH) * measured_;
    succeeded_ = !measured_any_ ? ok : SMOOTH * ok + (1 - SMOOTH) * succeeded_;
    measured_any_ = true;
    bucket_start_ = now;
    bucket_sends_ = bucket_successes_ = 0;
}

double RateLimiter::success_rate(Clock::time_point now) const {
    double elapsed = std::max(0.05, seconds_since(bucket_start_, now));
    double partial = static_cast<double>(bucket_successes_) / elapsed;
    if (!measured_any_) return partial;
    return std::max(succeeded_, partial);
}

double RateLimiter::measured_rate(Clock::time_point now) const {
    double elapsed = std::max(0.05, seconds_since(bucket_start_, now));
    double partial = static_cast<double>(bucket_sends_) / elapsed;
    if (!measured_any_) return partial;  // the first bucket, still open
    return std::max(measured_, partial);
}

void RateLimiter::refill(Clock::time_point now) {
    if (stamp_ != Clock::time_point{} && now > stamp_)
        tokens_ = std::min(capacity(fill_rate_), tokens_ + seconds_since(stamp_, now) * fill_rate_);
    stamp_ = now;
}

bool RateLimiter::try_acquire(Clock::time_point now) {
    measure(now);
    if (enabled_) {
        refill(now);
        if (tokens_ < 1.0) return false;
        tokens_ -= 1.0;
    }
    bucket_sends_ += 1;
    return true;
}

Clock::time_point RateLimiter::next_token(Clock::time_point now) const {
    if (!enabled_ || fill_rate_ <= 0) return now;
    double tokens = tokens_;
    if (stamp_ != Clock::time_point{} && now > stamp_)
        tokens = std::min(capacity(fill_rate_), tokens + seconds_since(stamp_, now) * fill_rate_);
    if (tokens >= 1.0) return now;
    return now + std::chrono::duration_cast<Clock::duration>(
                     std::chrono::duration<double>((1.0 - tokens) / fill_rate_));
}

bool RateLimiter::on_throttle(Clock::time_point now, Clock::time_point sent) {
    if (enabled_ && (sent < last_cut_ || seconds_since(last_cut_, now) < CUT_INTERVAL_S))
        return false;  // already cut for the rate that caused it
    measure(now);
    double measured = measured_rate(now);
    double succeeded = success_rate(now);
    if (succeeded > 0) {
        measured = std::min(measured, succeeded);
    } else if (!measured_any_) {
        // Throttled before any success and within the first bucket: the requests sent so far
        // say how many were in flight at once, not a rate; spread them over a whole bucket.
        measured = static_cast<double>(bucket_sends_) / MEASURE_S;
    }
    double rate = enabled_ ? std::min(measured, fill_rate_) : measured;
    refill(now);
    last_max_rate_ = std::max(rate, MIN_RATE);
    k_ = std::cbrt(last_max_rate_ * (1 - BETA) / SCALE);
    fill_rate_ = std::max(MIN_RATE, rate * BETA);
    tokens_ = std::min(tokens_, capacity(fill_rate_));
    if (!enabled_) tokens_ = 0.0;  // the requests already sent were the burst
    enabled_ = true;
    last_cut_ = now;
    cuts_ += 1;
    return true;
}

void RateLimiter::on_success(Clock::time_point now) {
    measure(now);
    bucket_successes_ += 1;
    if (!enabled_) return;
    refill(now);
    double t = seconds_since(last_cut_, now);
    double cubic = SCALE * std::pow(t - k_, 3.0) + last_max_rate_;
    // Back at the rate of the last cut without a throttle since: the limit may have lifted, so
    // probe upward exponentially as well (a short storm then leaves nothing slow behind).
    if (t > k_) cubic = std::max(cubic, last_max_rate_ * std::exp2((t - k_) / DOUBLING_S));
    cubic = std::min(cubic, MAX_RATE);  // finite after a long quiet (exp2 would overflow)
    double demand = measured_rate(now);
    // Not capped by what is being sent (the SDKs cap it at twice that): a DataLoader worker
    // waits for its siblings and between epochs, and a cap learnt while it waited would throttle
    // its next burst far below the endpoint's limit.
    fill_rate_ = std::max(MIN_RATE, cubic);
    // Quiet for a while and far above what is asked: the storm is over; stop limiting.
    if (t > std::max(k_, QUIET_S) && cubic >= RELEASE_FACTOR * std::max(demand, MIN_RATE))
        enabled_ = false;
}

SharedRateLimiter *SharedRateLimiter::attach(void *memory) {
    auto *shared = static_cast<SharedRateLimiter *>(memory);
    uint32_t fresh = 0;
    if (shared->state.compare_exchange_strong(fresh, 1)) {
        new (&shared->limiter) RateLimiter();
        shared->lock.store(0);
        shared->state.store(READY, std::memory_order_release);
        return shared;
    }
    for (int i = 0; i < SPIN_LIMIT; ++i) {
        if (shared->state.load(std::memory_order_acquire) == READY) return shared;
        std::this_thread::yield();
    }
    return nullptr;  // the process setting it up died there: use a limiter of one's own
}

bool SharedRateLimiter::try_lock() {
    for (int i = 0; i < SPIN_LIMIT; ++i) {
        uint32_t open = 0;
        if (lock.compare_exchange_weak(open, 1, std::memory_order_acquire)) return true;
        if (i > 64) std::this_thread::yield();
    }
    return false;
}

LimiterAccess::LimiterAccess(RateLimiter &own, SharedRateLimiter *&shared) : limiter_(&own) {
    if (shared == nullptr) return;
    if (!shared->try_lock()) {
        shared = nullptr;  // its holder died: from now on this process limits itself
        return;
    }
    locked_ = shared;
    limiter_ = &shared->limiter;
}

LimiterAccess::~LimiterAccess() {
    if (locked_ != nullptr) locked_->unlock();
}

}  // namespace nl
