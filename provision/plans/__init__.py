"""Plans: pure functions from facts to rank files, launch commands, hostfiles, pictures."""
