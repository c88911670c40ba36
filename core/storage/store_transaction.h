#pragma once
// Several writes into a TraceStore as one unit, for writers outside core/storage (the simulator's
// simulated runs): they say what to write through TraceStore's typed writers and never touch the
// connection or spell SQL themselves.
#include <functional>

#include "core/storage/trace_store.h"

namespace shardscope::core {

// Runs `write` inside one write transaction on `store` (BEGIN IMMEDIATE, under the store's busy
// policy): committed when `write` returns, rolled back when it throws (the exception goes on), so
// a failed or cancelled write leaves nothing behind.
void writeInTransaction(TraceStore& store, const std::function<void()>& write);

}  // namespace shardscope::core
