#include "core/crypto_api.h"

namespace berth {

const CryptoApi& crypto_api() {
  static const CryptoApi api;
  return api;
}

}  // namespace berth
