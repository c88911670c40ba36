#include "core/storage/store_transaction.h"

namespace shardscope::core {

void writeInTransaction(TraceStore& store, const std::function<void()>& write) {
  Transaction tx(store.db());
  write();
  tx.commit();
}

}  // namespace shardscope::core
