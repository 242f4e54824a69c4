//! Lock-down of nish-driver's agents (no_new_privs, capabilities, seccomp, Landlock) and the
//! self-check each agent reports to the broker before its first read.
