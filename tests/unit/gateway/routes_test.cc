#include <gtest/gtest.h>

#include "gateway/routes.h"

namespace berth::gateway {
namespace {

TEST(GatewayRoutes, EachErrorCodeHasItsStatus) {
  using E = ErrorCode;
  const std::pair<E, int> expected[] = {
      {E::kOther, 500},   {E::kNotFound, 404},    {E::kExists, 409},       {E::kPermission, 403},
      {E::kBusy, 503},    {E::kUnsupported, 500}, {E::kInvalidInput, 400}, {E::kIntegrity, 500},
      {E::kNetwork, 502}, {E::kHttp, 502},        {E::kCancelled, 500},
  };
  for (auto [code, status] : expected)
    EXPECT_EQ(http_status(code), status) << static_cast<int>(code);
}

TEST(GatewayRoutes, ARouteOverridesCodesThenTheRest) {
  using E = ErrorCode;
  // No overrides: the common mapping.
  EXPECT_EQ(http_status(E::kBusy, ErrorStatuses{}), 503);
  // Codes listed first, then `otherwise` for all others.
  ErrorStatuses submit{{{E::kExists, 422}, {E::kBusy, 503}}, 500};
  EXPECT_EQ(http_status(E::kExists, submit), 422);
  EXPECT_EQ(http_status(E::kBusy, submit), 503);
  EXPECT_EQ(http_status(E::kNotFound, submit), 500);
  EXPECT_EQ(http_status(E::kNetwork, submit), 500);
  // Codes listed, the common mapping for the rest.
  ErrorStatuses some{{{E::kNotFound, 410}}, 0};
  EXPECT_EQ(http_status(E::kNotFound, some), 410);
  EXPECT_EQ(http_status(E::kInvalidInput, some), 400);
}

TEST(GatewayRoutes, ClientErrorsShowTheDetailServerErrorsTheMessage) {
  Error e = make_error("GET", "http://slurm/x", "no such job", ErrorCode::kNotFound);
  EXPECT_EQ(error_text(e, 404), "no such job");
  EXPECT_EQ(error_text(e, 422), "no such job");
  EXPECT_EQ(error_text(e, 500), e.message());
  EXPECT_NE(e.message(), e.detail);
}

}  // namespace
}  // namespace berth::gateway
