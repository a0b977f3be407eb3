// The `gpujoin` command-line client; everything lives in app.cpp.
#include "app.hpp"

int main(int argc, char** argv) { return gpujoin::cli::RunCli(argc, argv); }
