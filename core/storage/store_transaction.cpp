#include "core/storage/store_transaction.h"
#include "core/storage/store_access.h"

namespace shardscope::core {

void writeInTransaction(TraceStore& store, const std::function<void()>& write) {
  Transaction tx(storeDb(store));
  write();
  tx.commit();
}

}  // namespace shardscope::core
