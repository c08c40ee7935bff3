// Linked with one floor's whole library and the floors below it (cmake/floors.cmake): the build
// fails when the floor calls into a floor above. Never run.
int main() { return 0; }
