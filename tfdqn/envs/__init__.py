"""Environments: names to gymnasium ids (`names`), one env with its wrappers (`make`, `wrappers`, `atari`),
vector envs behind one step interface (`vector`, `atari_vector`), per-env seeds (`seeds`), specs (`spec`)."""
