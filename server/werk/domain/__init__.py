"""Pure rules of the job model: no I/O, nothing imported from the rest of Werk."""
