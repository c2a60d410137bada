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

// A token made by serve itself (without --token-file): random, in a new file of a folder of the
// user's own, as Jupyter keeps its runtime files.
struct TokenFile {
  std::string path, token;
};

// A new token (32 random bytes, in hex) written to `folder`/`name` with mode 0600: the file is
// made with O_EXCL|O_NOFOLLOW under the folder opened once without following a link, so that
// no one can plant it or point it elsewhere. The folder (and its parent) is made with mode 0700
// where missing; it must be a folder of this user that no other user can read or write. Throws
// std::runtime_error naming the folder or file and what is wrong.
TokenFile make_token_file(const std::string& folder, const std::string& name);

// Whether an Authorization header's value carries `token` ("Bearer " and the token exactly), in
// a time that does not depend on where the two first differ.
bool bearer_token_matches(std::string_view header, std::string_view token);

}  // namespace slurm_train
