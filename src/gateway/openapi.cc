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
  auto with_errors = [&](J responses) {
    for (const auto& [status, answer] : errors.items())
      if (!responses.contains(status)) responses[status] = answer;
    return responses;
  };
  J me_responses = with_errors({{"200", json_response("the caller's identity and account", "Me")}});
  J id_param = J::array({{{"name", "id"}, {"in", "path"}, {"required", true},
                          {"schema", {{"type", "string"}}}}});
  J not_found = J::array({{"404", json_response("no such job, or another user's", "Error")}});
  J integer = {{"type", "integer"}};
  J string = {{"type", "string"}};
  J strings = {{"type", "array"}, {"items", string}};
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
            {"responses", me_responses}}}}},
        {"/v1/jobs",
         {{"get",
           {{"summary", "The caller's jobs (every job for an administrator), newest first"},
            {"parameters",
             J::array({{{"name", "state"}, {"in", "query"}, {"schema", string}},
                       {{"name", "since"}, {"in", "query"}, {"description", "Unix time"},
                        {"schema", integer}}})},
            {"responses", with_errors({{"200", json_response("the jobs", "JobList")}})}}},
          {"post",
           {{"summary", "Submit a job; an Idempotency-Key makes retries safe"},
            {"parameters",
             J::array({{{"name", "Idempotency-Key"}, {"in", "header"}, {"schema", string}}})},
            {"requestBody",
             {{"required", true},
              {"content", {{"application/json", {{"schema", ref("JobRequest")}}}}}}},
            {"responses",
             with_errors({{"201", json_response("recorded and sent to Slurm", "Job")},
                          {"200", json_response("a retry: the job the key made before", "Job")},
                          {"400", json_response("the body is not a valid job request", "Error")},
                          {"403", json_response("a valid token with no local account, or a job "
                                                "over one of the account's limits (the error "
                                                "names it: limit, value, requested or current)",
                                                "Error")},
                          {"422", json_response("the key was used for another request",
                                                "Error")}})}}}}},
        {"/v1/jobs/{id}",
         {{"parameters", id_param},
          {"get",
           {{"summary", "One job"},
            {"responses", with_errors({{"200", json_response("the job", "Job")}, not_found[0]})}}},
          {"delete",
           {{"summary", "Cancel a job"},
            {"responses",
             with_errors({{"202", json_response("cancel sent", "Job")}, not_found[0]})}}}}}}},
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
          {"JobRequest",
           {{"type", "object"},
            {"required", {"image"}},
            {"properties",
             {{"name", string},
              {"image", {{"type", "string"}, {"description", "an image reference or .sqsh file"}}},
              {"command", strings},
              {"env", {{"type", "object"}, {"additionalProperties", string}}},
              {"mounts", strings},
              {"workdir", string},
              {"class",
               {{"type", "string"},
                {"enum", {"batch", "cloud"}},
                {"description",
                 "cloud: short interactive work, under its own shorter walltime cap "
                 "(cloud_max_walltime_s), which Slurm enforces as the job's time limit"}}},
              {"resources",
               {{"type", "object"},
                {"properties",
                 {{"nodes", integer}, {"tasks", integer}, {"cpus_per_task", integer},
                  {"memory_mb", integer}, {"gpus", integer}, {"walltime_s", integer}}}}}}}}},
          {"Job",
           {{"type", "object"},
            {"properties",
             {{"id", string},
              {"name", string},
              {"image", string},
              {"owner", string},
              {"class", {{"type", "string"}, {"enum", {"batch", "cloud"}}}},
              {"walltime_s",
               {{"type", "integer"},
                {"description",
                 "the job's Slurm time limit as berthd set it, in seconds; 0: the partition's"}}},
              {"state",
               {{"type", "string"},
                {"description",
                 "ACCEPTED (recorded, not yet in Slurm), SUBMIT_FAILED, or Slurm's job state"}}},
              {"reason",
               {{"type", "string"},
                {"description",
                 "Slurm's reason; for TIMEOUT, the limit that cut the job (\"cut at the cloud "
                 "walltime cap, 3600 s (cloud_max_walltime_s)\")"}}},
              {"exit_code", {{"type", "integer"}, {"nullable", true}}},
              {"slurm_job_id", integer},
              {"nodes", string},
              {"created_at", integer},
              {"updated_at", integer}}}}},
          {"JobList",
           {{"type", "object"},
            {"properties", {{"jobs", {{"type", "array"}, {"items", ref("Job")}}}}}}},
          {"Error",
           {{"type", "object"},
            {"properties",
             {{"error",
               {{"type", "object"},
                {"properties",
                 {{"status", {{"type", "integer"}}},
                  {"message", {{"type", "string"}}},
                  {"limit",
                   {{"type", "string"},
                    {"description", "a 403 over a limit: its name (max_walltime_s, "
                                    "max_gpus_per_job, max_running_jobs, max_queued_jobs, "
                                    "cloud_max_walltime_s)"}}},
                  {"value", {{"type", "integer"}, {"description", "the limit's value"}}},
                  {"requested",
                   {{"type", "integer"},
                    {"description", "what the job asked for (walltime in s, GPUs)"}}},
                  {"current",
                   {{"type", "integer"},
                    {"description", "the account's running or queued jobs"}}}}}}}}}}}}}}},
      {"security", J::array({{{"bearer", J::array()}}})},
  };
  return doc;
}

}  // namespace berth::gateway
