"""`upgrade`: a running stack moved from one profile's releases to another's, one
component at a time, with TrainJobs in flight, judged after each step."""
