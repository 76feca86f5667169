/* A child that does next to nothing (as /bin/true): the start-up and exit
 * of a process are all it costs (benches/programs/spawn_children.c). */
int main(void) { return 0; }
