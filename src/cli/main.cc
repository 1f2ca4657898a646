// berth: the command table and the one place errors are printed.
#include <cstdio>

int main() {
  std::puts("berth " BERTH_VERSION);
  return 0;
}
