// A shared library that is not a seqbench plugin (no SEQBENCH_PLUGIN()): loading it with
// --plugin must be refused with a message that says what is missing.
extern "C" int not_a_seqbench_plugin() { return 0; }
