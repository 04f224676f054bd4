"""The JVM side of citeflow's Spark: starting a session (local driver or Spark Connect client), launching the
driver's JVM with its settings in a private file, its class-data archive, and the Spark Connect server that
`citeflow spark-server` runs. The DataFrame transforms the stages call are spark/'s other modules."""
