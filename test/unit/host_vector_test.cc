#include "train/io/host_vector.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "train/io/huge_pages.h"

using namespace slurm_train;

TEST_CASE("host vector: an explicit value fills what it gains; copies, assignments and moves keep the elements") {
  HostVector<float> v(3, 7.0f);
  CHECK(v == HostVector<float>{7.0f, 7.0f, 7.0f});
  v.clear();
  v.resize(5, 0.0f);  // the memory held 7s: the value is what its new elements hold
  CHECK(v == HostVector<float>(5, 0.0f));
  v[4] = 2.0f;
  HostVector<float> copy = v;
  CHECK(copy == v);
  HostVector<float> moved = std::move(copy);
  CHECK(moved == v);
  const float raw[3] = {1.0f, 2.0f, 3.0f};
  v.assign(raw, raw + 3);
  CHECK(v == HostVector<float>{1.0f, 2.0f, 3.0f});
}

TEST_CASE("host vector: elements of other types are constructed as they ask") {
  HostVector<std::string> s(2);  // default-initialised strings are empty strings
  CHECK(s[0].empty());
  s.emplace_back(3, 'x');
  CHECK(s.back() == "xxx");
}

TEST_CASE("huge pages: a buffer sized with a value holds it, also over memory of a larger earlier size") {
  HostVector<float> v;
  resize_in_huge_pages(v, std::size_t{3} << 20, 0.0f);  // 12 MiB: whole huge pages inside
  CHECK(v.size() == std::size_t{3} << 20);
  CHECK(v.front() == 0.0f);
  CHECK(v.back() == 0.0f);
  std::memset(v.data(), 0xff, v.size() * sizeof(float));
  v.resize(10);
  resize_in_huge_pages(v, std::size_t{2} << 20, 1.5f);  // within the capacity: no new memory
  CHECK(v[9] != v[9]);                                  // the kept elements are the NaNs written before
  CHECK(v[10] == 1.5f);
  CHECK(v.back() == 1.5f);
}
