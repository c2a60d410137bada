// `serve --token-file F`: the bearer token every request must carry (Authorization: Bearer T).
// The file is a secret on a node many users share: it must be a regular file of the user who
// runs serve that no one else may read or write, or serve refuses to start.
#pragma once

#include <string>
#include <string_view>

namespace slurm_train {

// The token: the file's first line without surrounding blanks; 1 to 4096 visible ASCII
// characters. Throws std::runtime_error naming the file and what is wrong (its owner, its
// mode, an empty or unusable token).
std::string read_token_file(const std::string& path);

// Whether an Authorization header's value carries `token` ("Bearer " and the token exactly), in
// a time that does not depend on where the two first differ.
bool bearer_token_matches(std::string_view header, std::string_view token);

}  // namespace slurm_train
