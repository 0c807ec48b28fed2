"""Private, pure solvers: each returns its result and the privacy events it caused."""
