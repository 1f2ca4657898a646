// The OpenAPI 3.0 document of berthd's API (docs/api.md summarises it; keep the two together).
#include "gateway/server.h"

namespace berth::gateway {
namespace {

using J = nlohmann::ordered_json;

J ref(const char* schema) { return {{"$ref", std::string("#/components/schemas/") + schema}}; }

J json_response(const char* description, const char* schema) {
  return {{"description", description},
          {"content", {{"application/json", {{"schema", ref(schema)}}}}}};
}

}  // namespace

nlohmann::ordered_json openapi_document(const std::string& version) {
  J errors = {{"401", json_response("no valid bearer token (see WWW-Authenticate)", "Error")},
              {"403", json_response("a valid token whose identity has no local account",
                                    "Error")}};
  J me_responses = {{"200", json_response("the caller's identity and account", "Me")}};
  me_responses.update(errors);
  J doc = {
      {"openapi", "3.0.3"},
      {"info",
       {{"title", "berthd"},
        {"version", version},
        {"description",
         "Berth's REST job gateway: OIDC bearer tokens, jobs run through Slurm. Fields may be "
         "added to any object; none changes meaning."}}},
      {"paths",
       {{"/v1/health",
         {{"get",
           {{"summary", "Liveness; needs no token"},
            {"security", J::array()},
            {"responses", {{"200", json_response("berthd is serving", "Health")}}}}}}},
        {"/v1/openapi.json",
         {{"get",
           {{"summary", "This document"},
            {"security", J::array()},
            {"responses", {{"200", {{"description", "an OpenAPI 3 document"}}}}}}}}},
        {"/v1/me",
         {{"get",
           {{"summary", "The identity, local account and groups the gateway sees"},
            {"responses", me_responses}}}}}}},
      {"components",
       {{"securitySchemes",
         {{"bearer", {{"type", "http"}, {"scheme", "bearer"}, {"bearerFormat", "JWT"}}}}},
        {"schemas",
         {{"Health",
           {{"type", "object"},
            {"properties",
             {{"status", {{"type", "string"}, {"enum", {"ok"}}}},
              {"version", {{"type", "string"}}}}}}},
          {"Me",
           {{"type", "object"},
            {"properties",
             {{"issuer", {{"type", "string"}}},
              {"subject", {{"type", "string"}}},
              {"user", {{"type", "string"}, {"description", "the local account jobs run as"}}},
              {"uid", {{"type", "integer"}}},
              {"gid", {{"type", "integer"}}},
              {"groups", {{"type", "array"}, {"items", {{"type", "string"}}}}},
              {"admin", {{"type", "boolean"}}}}}}},
          {"Error",
           {{"type", "object"},
            {"properties",
             {{"error",
               {{"type", "object"},
                {"properties",
                 {{"status", {{"type", "integer"}}},
                  {"message", {{"type", "string"}}}}}}}}}}}}}}},
      {"security", J::array({{{"bearer", J::array()}}})},
  };
  return doc;
}

}  // namespace berth::gateway
