/* A stand-in libnvidia-ml.so.1 for machines without an NVIDIA driver: the calls the gpuwatch probe
 * makes through nvidia-ml-py (pynvml), answering with figures recorded on an H200 (8 GPUs by default).
 *
 * Built by tests/support/fake_nvml.py with the system C compiler; loaded by putting its folder on
 * LD_LIBRARY_PATH. It measures the probe's own NVML path (Python, ctypes, pynvml); what it leaves out is
 * the driver's cost per call (an ioctl each: 2-10 us hot, up to ~45 us for the first after a sleep).
 *
 * Environment:
 *   GPUWATCH_FAKE_NVML_GPUS   how many GPUs (default 8, at most 64)
 *   GPUWATCH_FAKE_NVML_PIDS   comma-separated pids: the i-th runs on GPU i % GPUs (default none)
 *   GPUWATCH_FAKE_NVML_NO_POWER   set: power readings fail with NVML_ERROR_NOT_SUPPORTED (as on some boards)
 *   GPUWATCH_FAKE_NVML_MEM_CLOCK  the memory clock in MHz every GPU reports; unset: the memory clock is
 *                                 NVML_ERROR_NOT_SUPPORTED (the H200 recordings have no memory clock to replay)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
enum { NVML_SUCCESS = 0, NVML_ERROR_INVALID_ARGUMENT = 2, NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_INSUFFICIENT_SIZE = 7 };

typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gpuInstanceId, computeInstanceId; } nvmlProcessInfo_t;

#define MAX_GPUS 64
#define MAX_PIDS 256
#define MIB (1024ULL * 1024ULL)
/* Recorded on an H200 (benchmarks/results/nvml-vs-smi-h200.json): v1 counts this reservation as used, v2 does not. */
static const unsigned long long TOTAL = 143771ULL * MIB;
static const unsigned long long RESERVED = 644939776ULL;
static const unsigned long long JOB_MEMORY = 70000ULL * MIB;

static int gpus = 8;
static unsigned int pids[MAX_PIDS];
static int npids = 0;
static int no_power = 0;
static long mem_clock = -1;  /* -1: not supported */
static unsigned long calls[MAX_GPUS];  /* per GPU: makes the moving figures move, as real ones do */
static char devices[MAX_GPUS];  /* a handle is a pointer into this array */

static int index_of(nvmlDevice_t h) {
    long i = (char *)h - devices;
    return (i >= 0 && i < gpus) ? (int)i : -1;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    const char *n = getenv("GPUWATCH_FAKE_NVML_GPUS");
    gpus = n ? atoi(n) : 8;
    if (gpus < 0) gpus = 0;
    if (gpus > MAX_GPUS) gpus = MAX_GPUS;
    npids = 0;
    no_power = getenv("GPUWATCH_FAKE_NVML_NO_POWER") != NULL;
    const char *mc = getenv("GPUWATCH_FAKE_NVML_MEM_CLOCK");
    mem_clock = mc ? atol(mc) : -1;
    const char *p = getenv("GPUWATCH_FAKE_NVML_PIDS");
    while (p && *p && npids < MAX_PIDS) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p) break;
        pids[npids++] = (unsigned int)v;
        p = (*end == ',') ? end + 1 : end;
    }
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }
const char *nvmlErrorString(nvmlReturn_t r) { return r == NVML_SUCCESS ? "Success" : "Fake NVML error"; }

nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned int len) {
    snprintf(buf, len, "%s", "580.95.05");
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) { *count = (unsigned int)gpus; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *h) {
    if ((int)i >= gpus) return NVML_ERROR_INVALID_ARGUMENT;
    *h = &devices[i];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *h) { return nvmlDeviceGetHandleByIndex_v2(i, h); }

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char *buf, unsigned int len) {
    int i = index_of(h);
    if (i < 0) return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(buf, len, "GPU-fake0000-0000-0000-0000-%012d", i);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char *buf, unsigned int len) {
    if (index_of(h) < 0) return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(buf, len, "%s", "NVIDIA H200");
    return NVML_SUCCESS;
}

static int jobs_on(int i) {
    int n = 0;
    for (int k = 0; k < npids; k++) if (k % gpus == i) n++;
    return n;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t h, nvmlUtilization_t *u) {
    int i = index_of(h);
    if (i < 0) return NVML_ERROR_INVALID_ARGUMENT;
    calls[i]++;
    u->gpu = jobs_on(i) ? 90 + (unsigned int)(calls[i] % 10) : 0;
    u->memory = jobs_on(i) ? 40 + (unsigned int)(calls[i] % 7) : 0;
    return NVML_SUCCESS;
}
static unsigned long long used_v2(int i) { return 4 * MIB + JOB_MEMORY * (unsigned long long)jobs_on(i); }
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t *m) {
    int i = index_of(h);
    if (i < 0) return NVML_ERROR_INVALID_ARGUMENT;
    m->total = TOTAL;
    m->used = used_v2(i) + RESERVED;
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t h, nvmlMemory_v2_t *m) {
    int i = index_of(h);
    if (i < 0) return NVML_ERROR_INVALID_ARGUMENT;
    m->total = TOTAL;
    m->reserved = RESERVED;
    m->used = used_v2(i);
    m->free = m->total - m->reserved - m->used;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t h, unsigned int *mw) {
    int i = index_of(h);
    if (i < 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (no_power) return NVML_ERROR_NOT_SUPPORTED;
    *mw = jobs_on(i) ? 680000 + (unsigned int)(calls[i] % 13) * 997 : 81340;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t h, unsigned int *mw) {
    if (index_of(h) < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *mw = 700000;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t h, int sensor, unsigned int *c) {
    int i = index_of(h);
    (void)sensor;
    if (i < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *c = jobs_on(i) ? 54 + (unsigned int)(calls[i] / 30 % 3) : 33;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t h, int type, unsigned int *mhz) {
    int i = index_of(h);
    if (i < 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (type == NVML_CLOCK_MEM) {
        if (mem_clock < 0) return NVML_ERROR_NOT_SUPPORTED;
        *mhz = (unsigned int)mem_clock;
        return NVML_SUCCESS;
    }
    if (type != NVML_CLOCK_SM) return NVML_ERROR_NOT_SUPPORTED;
    *mhz = jobs_on(i) ? 1980 - (unsigned int)(calls[i] % 4) * 15 : 345;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned int *count, nvmlProcessInfo_t *out) {
    int i = index_of(h);
    if (i < 0) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int n = (unsigned int)jobs_on(i);
    if (n == 0) { *count = 0; return NVML_SUCCESS; }
    if (out == NULL || *count < n) { *count = n; return NVML_ERROR_INSUFFICIENT_SIZE; }
    unsigned int k = 0;
    for (int j = 0; j < npids; j++) {
        if (j % gpus != i) continue;
        out[k].pid = pids[j];
        out[k].usedGpuMemory = JOB_MEMORY;
        out[k].gpuInstanceId = 0xFFFFFFFFu;
        out[k].computeInstanceId = 0xFFFFFFFFu;
        k++;
    }
    *count = k;
    return NVML_SUCCESS;
}
