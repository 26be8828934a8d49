"""Output of Slurm versions other than the 22.05 the real-cluster tests run, for the parsers.

Written by hand from the documented formats (squeue(1)/sacct(1)/scontrol(1) man pages of each release
and the OpenAPI data_parser schemas v0.0.40 for 23.11 and v0.0.41 for 24.05, as published in the Slurm
documentation), not recorded from a live cluster: values are made up, field names and shapes are the
documented ones. `U` is the field separator gpuwatch asks squeue and sacct for.
"""

U = "\x1f"


def line(*fields: str) -> str:
    return U.join(fields) + U


# squeue --noheader --array --Format=<squeue_text.FIELDS, each ':0\x1f'> (the same request on 22.05-24.05).
# 23.11 prints STDOUT as the raw pattern (like 22.05); 24.05 may print it with the patterns filled in.
# Field order: JobID JobArrayID ArrayJobID ArrayTaskID Name UserName State Reason NodeList TimeUsed
#              TimeLimit Partition WorkDir SubmitTime StartTime STDOUT STDERR
SQUEUE_TEXT_23_11 = "\n".join([
    line("4101", "4101", "4101", "N/A", "llama 70b | sft", "alice", "RUNNING", "None", "gpu[01-04]", "1-02:03:04",
         "2-00:00:00", "h200", "/home/alice/runs", "2024-05-01T10:00:00", "2024-05-01T10:02:00",
         "logs/%x-%j-%N.out", "logs/%x-%j-%N.err"),
    line("4102", "4100_7", "4100", "7", "sweep", "alice", "RUNNING", "None", "gpu07", "12:34", "1:00:00", "h200",
         "/home/alice/sweep", "2024-05-01T10:00:00", "2024-05-01T11:00:00", "/scratch/alice/%A_%a.log", ""),
    line("4103", "4103", "4103", "N/A", "eval", "alice", "PENDING", "QOSMaxGRESPerUser", "", "0:00", "30:00",
         "h200", "/home/alice", "2024-05-01T11:05:00", "N/A", "/home/alice/slurm-%j.out", ""),
    line("4104", "4104", "4104", "N/A", "100%done", "alice", "PENDING", "Dependency", "", "0:00", "UNLIMITED",
         "h200", "/home/alice", "2024-05-01T11:06:00", "N/A", "/home/alice/%x_%%.out", ""),
]) + "\n"

SQUEUE_TEXT_24_05 = "\n".join([
    line("9001", "9001", "9001", "N/A", "train", "bob", "RUNNING", "None", "dgx-a[003,005]", "3:00:00",
         "12:00:00", "batch", "/u/bob", "2024-09-01T08:00:00", "2024-09-01T08:00:05",
         "/u/bob/logs/train-9001-dgx-a003.out", "/u/bob/logs/train-9001-dgx-a003.out"),
    line("9002", "9002", "9002", "N/A", "prep", "bob", "COMPLETING", "None", "cpu1", "0:45", "10:00", "batch",
         "/u/bob", "2024-09-01T08:10:00", "2024-09-01T08:10:01", "/u/bob/prep.out", "/u/bob/prep.out"),
]) + "\n"

# squeue --json on 23.11 (data_parser v0.0.40): numbers wrapped in {set, infinite, number}, job_state a list.
SQUEUE_JSON_23_11 = """{
  "jobs": [
    {"account": "ml", "array_job_id": {"set": true, "infinite": false, "number": 0},
     "array_task_id": {"set": false, "infinite": false, "number": 0},
     "current_working_directory": "/home/alice/runs",
     "exit_code": {"status": ["SUCCESS"], "return_code": {"set": true, "infinite": false, "number": 0},
                   "signal": {"id": {"set": false, "infinite": false, "number": 0}, "name": ""}},
     "job_id": 4101, "job_state": ["RUNNING"], "name": "llama 70b | sft", "nodes": "gpu[01-04]",
     "partition": "h200", "standard_error": "logs/%x-%j-%N.err", "standard_output": "logs/%x-%j-%N.out",
     "start_time": {"set": true, "infinite": false, "number": 1714557720},
     "state_reason": "None", "submit_time": {"set": true, "infinite": false, "number": 1714557600},
     "time_limit": {"set": true, "infinite": false, "number": 2880}, "user_name": "alice"},
    {"array_job_id": {"set": true, "infinite": false, "number": 4100},
     "array_task_id": {"set": true, "infinite": false, "number": 7},
     "current_working_directory": "/home/alice/sweep",
     "exit_code": {"status": ["SUCCESS"], "return_code": {"set": true, "infinite": false, "number": 0}},
     "job_id": 4102, "job_state": ["RUNNING"], "name": "sweep", "nodes": "gpu07", "partition": "h200",
     "standard_output": "/scratch/alice/%A_%a.log",
     "start_time": {"set": true, "infinite": false, "number": 1714561200}, "state_reason": "None",
     "time_limit": {"set": true, "infinite": false, "number": 60}, "user_name": "alice"},
    {"array_job_id": {"set": true, "infinite": false, "number": 0},
     "array_task_id": {"set": false, "infinite": false, "number": 0},
     "current_working_directory": "/home/alice", "job_id": 4103, "job_state": ["PENDING"], "name": "eval",
     "nodes": "", "partition": "h200", "standard_output": "/home/alice/slurm-%j.out",
     "start_time": {"set": true, "infinite": false, "number": 0}, "state_reason": "QOSMaxGRESPerUser",
     "time_limit": {"set": false, "infinite": true, "number": 0}, "user_name": "alice"}
  ],
  "meta": {"plugin": {"type": "", "name": "", "data_parser": "data_parser/v0.0.40", "accounting_storage": ""},
           "slurm": {"version": {"major": "23", "micro": "5", "minor": "11"}, "release": "23.11.5",
                     "cluster": "ml"}},
  "errors": [], "warnings": []
}"""

# squeue --json on 24.05 (data_parser v0.0.41): as v0.0.40, plus stdout_expanded / stderr_expanded.
SQUEUE_JSON_24_05 = """{
  "jobs": [
    {"array_job_id": {"set": true, "infinite": false, "number": 0},
     "array_task_id": {"set": false, "infinite": false, "number": 0},
     "current_working_directory": "/u/bob",
     "exit_code": {"status": ["SUCCESS"], "return_code": {"set": true, "infinite": false, "number": 0},
                   "signal": {"id": {"set": false, "infinite": false, "number": 0}, "name": ""}},
     "job_id": 9001, "job_state": ["RUNNING"], "name": "train", "nodes": "dgx-a[003,005]", "partition": "batch",
     "standard_output": "/u/bob/logs/%x-%j-%N.out", "standard_error": "",
     "stdout_expanded": "/u/bob/logs/train-9001-dgx-a003.out", "stderr_expanded": "",
     "start_time": {"set": true, "infinite": false, "number": 1725177605}, "state_reason": "None",
     "time_limit": {"set": true, "infinite": false, "number": 720}, "user_name": "bob"},
    {"array_job_id": {"set": true, "infinite": false, "number": 0},
     "array_task_id": {"set": false, "infinite": false, "number": 0},
     "current_working_directory": "/u/bob",
     "exit_code": {"status": ["SIGNALED"], "return_code": {"set": true, "infinite": false, "number": 0},
                   "signal": {"id": {"set": true, "infinite": false, "number": 9}, "name": "KILL"}},
     "job_id": 9003, "job_state": ["TIMEOUT"], "name": "long", "nodes": "dgx-a007", "partition": "batch",
     "standard_output": "/u/bob/long.out", "stdout_expanded": "/u/bob/long.out",
     "start_time": {"set": true, "infinite": false, "number": 1725100000}, "state_reason": "TimeLimit",
     "time_limit": {"set": true, "infinite": false, "number": 60}, "user_name": "bob"}
  ],
  "meta": {"plugin": {"type": "", "name": "", "data_parser": "data_parser/v0.0.41", "accounting_storage": ""},
           "slurm": {"version": {"major": "24", "micro": "3", "minor": "05"}, "release": "24.05.3",
                     "cluster": "dgx"}},
  "errors": [], "warnings": []
}"""

# sacct --noheader --parsable2 --delimiter=<U> --allocations --format=<sacct.FIELDS> (23.11 / 24.05).
# Field order: JobID JobIDRaw JobName User State ExitCode NodeList Elapsed Timelimit Partition WorkDir
#              Submit Start End
SACCT_23_11 = "\n".join([
    U.join(["4090", "4090", "fails | badly", "alice", "FAILED", "3:0", "gpu02", "00:00:07", "01:00:00", "h200",
            "/home/alice", "2024-05-01T09:00:00", "2024-05-01T09:00:01", "2024-05-01T09:00:08"]),
    U.join(["4091", "4091", "cancelled", "alice", "CANCELLED by 1000", "0:15", "gpu[03-04]", "00:10:00",
            "2-00:00:00", "h200", "/home/alice", "2024-05-01T09:00:00", "2024-05-01T09:01:00",
            "2024-05-01T09:11:00"]),
    U.join(["4100_3", "4105", "sweep", "alice", "OUT_OF_MEMORY", "0:125", "gpu05", "00:02:00", "01:00:00",
            "h200", "/home/alice/sweep", "2024-05-01T10:00:00", "2024-05-01T10:00:30", "2024-05-01T10:02:30"]),
    U.join(["4092", "4092", "never ran", "alice", "CANCELLED by 1000", "0:0", "None assigned", "00:00:00",
            "01:00:00", "h200", "/home/alice", "2024-05-01T09:00:00", "None", "2024-05-01T09:05:00"]),
]) + "\n"

# scontrol show job -o on 24.05: StdOut/StdErr come back with every pattern filled in (%N included).
SCONTROL_24_05 = (
    "JobId=9003 JobName=long UserId=bob(1001) GroupId=bob(1001) MCS_label=N/A Priority=1 Nice=0 Account=ml "
    "QOS=normal JobState=TIMEOUT Reason=TimeLimit Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 "
    "Reboot=0 ExitCode=0:15 RunTime=01:00:02 TimeLimit=01:00:00 TimeMin=N/A SubmitTime=2024-09-01T07:00:00 "
    "EligibleTime=2024-09-01T07:00:00 AccrueTime=2024-09-01T07:00:00 StartTime=2024-09-01T07:00:05 "
    "EndTime=2024-09-01T08:00:07 Deadline=N/A Partition=batch AllocNode:Sid=login1:4242 ReqNodeList=(null) "
    "ExcNodeList=(null) NodeList=dgx-a[007-008] BatchHost=dgx-a007 NumNodes=2 NumCPUs=64 NumTasks=2 "
    "CPUs/Task=32 ReqB:S:C:T=0:0:*:* ReplicationOf=(null) TRES=cpu=64,mem=500G,node=2,billing=64,gres/gpu=16 "
    "Command=/u/bob/long.sbatch WorkDir=/u/bob StdErr=/u/bob/long-9003-dgx-a007.err StdIn=/dev/null "
    "StdOut=/u/bob/long-9003-dgx-a007.out TresPerNode=gres/gpu:8\n"
)
