#include "core/sha256.h"

#include <fcntl.h>
#include <unistd.h>

#include "core/crypto_api.h"
#include "core/fs.h"

namespace berth {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
  ~Impl() {
    if (ctx) crypto_api().md_ctx_free(ctx);
  }
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = crypto_api().md_ctx_new();
  crypto_api().digest_init(impl_->ctx, crypto_api().sha256(), nullptr);
}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(const void* data, size_t len) {
  crypto_api().digest_update(impl_->ctx, data, len);
}

std::string Sha256::hex_digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  crypto_api().digest_final(impl_->ctx, md, &len);
  static const char* hexd = "0123456789abcdef";
  std::string out;
  out.reserve(size_t{len} * 2);
  for (unsigned i = 0; i < len; ++i) {
    out += hexd[md[i] >> 4];
    out += hexd[md[i] & 15];
  }
  return out;
}

std::string sha256_digest(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.digest();
}

std::string hmac_sha256(std::string_view key, std::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const CryptoApi& api = crypto_api();
  // No null pointers, even for no bytes.
  const char* key_bytes = key.empty() ? "" : key.data();
  const char* data_bytes = data.empty() ? "" : data.data();
  if (api.hmac(api.sha256(), key_bytes, static_cast<int>(key.size()),
               reinterpret_cast<const unsigned char*>(data_bytes), data.size(), mac,
               &len) == nullptr)
    return "";
  return std::string(reinterpret_cast<const char*>(mac), len);
}

Result<std::string> sha256_file(const std::string& path) {
  UniqueFd fd = BERTH_TRY(open_file(path, O_RDONLY));
  Sha256 h;
  std::string buf(1 << 20, '\0');
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("read", path);
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<size_t>(n));
  }
  return h.digest();
}

Status validate_digest(std::string_view digest) {
  constexpr std::string_view prefix = "sha256:";
  if (digest.substr(0, prefix.size()) != prefix)
    return make_error("check digest", std::string(digest), "only sha256 digests are supported");
  auto hex = digest.substr(prefix.size());
  if (hex.size() != 64) return make_error("check digest", std::string(digest), "not 64 hex digits");
  for (char c : hex) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return make_error("check digest", std::string(digest), "not lowercase hex");
  }
  return {};
}

std::string_view digest_hex(std::string_view digest) {
  auto colon = digest.find(':');
  return colon == std::string_view::npos ? digest : digest.substr(colon + 1);
}

}  // namespace berth
