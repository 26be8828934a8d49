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
 *   GPUWATCH_FAKE_NVML_PIDS_FILE  a file of such pids, read again on every process listing (a test makes a
 *                             process that starts later, or outlives its parent, hold GPU memory); when set,
 *                             it replaces GPUWATCH_FAKE_NVML_PIDS. A missing file lists no pids.
 *   GPUWATCH_FAKE_NVML_NO_POWER   set: power readings fail with NVML_ERROR_NOT_SUPPORTED (as on some boards)
 *   GPUWATCH_FAKE_NVML_MEM_CLOCK  the memory clock in MHz every GPU reports; unset: the memory clock is
 *                                 NVML_ERROR_NOT_SUPPORTED (the H200 recordings have no memory clock to replay)
 *   GPUWATCH_FAKE_NVML_GPM    a file of GPM rows recorded on an H200 (tests/data/gpm-h200), one a line:
 *                             "GPU UTIL POWER_W SM_ACTIVE TENSOR_ACTIVE DRAM_ACTIVE". A GPU with rows supports GPM
 *                             (nvmlGpmQueryDeviceSupport), and its utilisation and power are its current row's;
 *                             each nvmlGpmSampleGet moves it to its next row (cycling), and nvmlGpmMetricsGet
 *                             answers the row of the newer sample. A GPU without rows: GPM unsupported.
 *   GPUWATCH_FAKE_NVML_PROC_SM  "pid:sm,pid:sm,...": what nvmlDeviceGetProcessUtilization reports of each listed
 *                             pid on its GPU (SM %); a pid not listed is left out, as NVML leaves out a process
 *                             that ran nothing (0 %). Unset: the first pid of each GPU at 96-98 % SM and the
 *                             others left out, as an H200 reported a matmul loop beside an idle context holder.
 *                             A GPU where no pid is reported answers NVML_ERROR_NOT_FOUND, as NVML does.
 *   GPUWATCH_FAKE_NVML_PROC_UTIL_US  each nvmlDeviceGetProcessUtilization call spins this many microseconds first:
 *                             the driver's cost of that call, which the stand-in otherwise leaves out (an H200:
 *                             1.5-4.6 ms a call from Python)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
enum { NVML_SUCCESS = 0, NVML_ERROR_INVALID_ARGUMENT = 2, NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_NOT_FOUND = 6,
       NVML_ERROR_INSUFFICIENT_SIZE = 7 };

typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gpuInstanceId, computeInstanceId; } nvmlProcessInfo_t;
typedef struct { unsigned int pid; unsigned long long timeStamp; unsigned int smUtil, memUtil, encUtil, decUtil; } nvmlProcessUtilizationSample_t;

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
static long proc_util_us = 0;  /* GPUWATCH_FAKE_NVML_PROC_UTIL_US */
static int proc_sm_set = 0;  /* GPUWATCH_FAKE_NVML_PROC_SM given */
static int proc_sm[MAX_PIDS];  /* per pid of `pids`: its SM %, -1: left out */
static long mem_clock = -1;  /* -1: not supported */
static unsigned long calls[MAX_GPUS];  /* per GPU: makes the moving figures move, as real ones do */
static char devices[MAX_GPUS];  /* a handle is a pointer into this array */

/* GPM replay: per GPU, its rows and the one it is at */
#define MAX_GPM_ROWS 4096
typedef struct { double util, power_w, sm, tensor, dram; } gpm_row_t;
static gpm_row_t gpm_rows[MAX_GPUS][MAX_GPM_ROWS];
static int gpm_count[MAX_GPUS];
static int gpm_at[MAX_GPUS];
static const gpm_row_t *gpm_row(int i) { return gpm_count[i] ? &gpm_rows[i][gpm_at[i] % gpm_count[i]] : NULL; }
static void load_gpm(const char *path) {
    memset(gpm_count, 0, sizeof gpm_count);
    memset(gpm_at, 0, sizeof gpm_at);
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return;
    int g;
    gpm_row_t r;
    while (fscanf(f, "%d %lf %lf %lf %lf %lf", &g, &r.util, &r.power_w, &r.sm, &r.tensor, &r.dram) == 6) {
        if (g >= 0 && g < MAX_GPUS && gpm_count[g] < MAX_GPM_ROWS) gpm_rows[g][gpm_count[g]++] = r;
    }
    fclose(f);
}

static void parse_pids(const char *p) {
    npids = 0;
    while (p && *p && npids < MAX_PIDS) {
        while (*p == ',' || *p == ' ' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p) break;
        pids[npids++] = (unsigned int)v;
        p = end;
    }
}

static const char *pids_file = NULL;
static void reread_pids(void) {
    if (!pids_file) return;
    char buf[4096];
    size_t n = 0;
    FILE *f = fopen(pids_file, "r");
    if (f) {
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
    }
    buf[n] = 0;
    parse_pids(buf);
}

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
    load_gpm(getenv("GPUWATCH_FAKE_NVML_GPM"));
    parse_pids(getenv("GPUWATCH_FAKE_NVML_PIDS"));
    pids_file = getenv("GPUWATCH_FAKE_NVML_PIDS_FILE");
    reread_pids();
    const char *cost = getenv("GPUWATCH_FAKE_NVML_PROC_UTIL_US");
    proc_util_us = cost ? atol(cost) : 0;
    for (int k = 0; k < MAX_PIDS; k++) proc_sm[k] = -1;
    const char *q = getenv("GPUWATCH_FAKE_NVML_PROC_SM");
    proc_sm_set = q != NULL;
    while (q && *q) {
        char *end;
        unsigned long pid = strtoul(q, &end, 10);
        if (end == q || *end != ':') break;
        long sm = strtol(end + 1, &end, 10);
        for (int k = 0; k < npids; k++) if (pids[k] == pid) proc_sm[k] = (int)sm;
        q = (*end == ',') ? end + 1 : end;
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
    if (i == 0) reread_pids();  /* once per sample: every GPU of it reads the same list */
    calls[i]++;
    const gpm_row_t *r = gpm_row(i);
    if (r) { u->gpu = (unsigned int)r->util; u->memory = 0; return NVML_SUCCESS; }
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
    const gpm_row_t *r = gpm_row(i);
    if (r) { *mw = (unsigned int)(r->power_w * 1000.0); return NVML_SUCCESS; }
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

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t h, nvmlProcessUtilizationSample_t *out, unsigned int *count,
                                             unsigned long long lastSeen) {
    int i = index_of(h);
    if (i < 0 || count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (proc_util_us > 0) {  /* CPU busy, as a conservative stand-in for the driver's time */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do clock_gettime(CLOCK_MONOTONIC, &t);
        while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < proc_util_us);
    }
    unsigned int n = 0, first = 1;
    int sm[MAX_PIDS];
    for (int j = 0; j < npids; j++) {
        sm[j] = -1;
        if (j % gpus != i) continue;
        sm[j] = proc_sm_set ? proc_sm[j] : (first ? 96 + (int)(calls[i] % 3) : -1);
        first = 0;
        if (sm[j] >= 0) n++;
    }
    if (n == 0) return NVML_ERROR_NOT_FOUND;
    if (out == NULL || *count < n) { *count = n; return NVML_ERROR_INSUFFICIENT_SIZE; }
    unsigned long long now = lastSeen + 1000000ULL;  /* a second after the last read, as a later call sees */
    unsigned int k = 0;
    for (int j = 0; j < npids; j++) {
        if (sm[j] < 0) continue;
        out[k].pid = pids[j];
        out[k].timeStamp = now;
        out[k].smUtil = (unsigned int)sm[j];
        out[k].memUtil = (unsigned int)sm[j] / 2;
        out[k].encUtil = out[k].decUtil = 0;
        k++;
    }
    *count = k;
    return NVML_SUCCESS;
}

/* ---- GPM (nvidia-ml-py's structs: c_nvmlGpmSupport_t, c_nvmlGpmMetricsGet_t) */
enum { GPM_GRAPHICS_UTIL = 1, GPM_SM_UTIL = 2, GPM_SM_OCCUPANCY = 3, GPM_ANY_TENSOR_UTIL = 5, GPM_DRAM_BW_UTIL = 10 };
#define GPM_METRIC_MAX 477
typedef struct { int gpu; int row; } gpm_sample_t;
typedef struct { unsigned int version, isSupportedDevice; } nvmlGpmSupport_t;
typedef struct { const char *shortName, *longName, *unit; } metric_info_t;
typedef struct { unsigned int metricId; nvmlReturn_t nvmlReturn; double value; metric_info_t info; } nvmlGpmMetric_t;
typedef struct {
    unsigned int version, numMetrics;
    gpm_sample_t *sample1, *sample2;
    nvmlGpmMetric_t metrics[GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t h, nvmlGpmSupport_t *s) {
    int i = index_of(h);
    if (i < 0 || s == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    s->isSupportedDevice = gpm_count[i] > 0;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlGpmSampleAlloc(gpm_sample_t **out) {
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *out = calloc(1, sizeof(gpm_sample_t));
    (*out)->gpu = -1;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlGpmSampleFree(gpm_sample_t *s) { free(s); return NVML_SUCCESS; }
nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t h, gpm_sample_t *s) {
    int i = index_of(h);
    if (i < 0 || s == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gpm_count[i]) return NVML_ERROR_NOT_SUPPORTED;
    gpm_at[i]++;
    s->gpu = i;
    s->row = gpm_at[i] % gpm_count[i];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *m) {
    if (m == NULL || m->sample1 == NULL || m->sample2 == NULL || m->numMetrics > GPM_METRIC_MAX)
        return NVML_ERROR_INVALID_ARGUMENT;
    int i = m->sample2->gpu;
    if (i < 0 || i != m->sample1->gpu) return NVML_ERROR_INVALID_ARGUMENT;
    const gpm_row_t *r = &gpm_rows[i][m->sample2->row];
    for (unsigned int k = 0; k < m->numMetrics; k++) {
        nvmlGpmMetric_t *x = &m->metrics[k];
        x->nvmlReturn = NVML_SUCCESS;
        switch (x->metricId) {
        case GPM_SM_UTIL: x->value = r->sm; break;
        case GPM_ANY_TENSOR_UTIL: x->value = r->tensor; break;
        case GPM_DRAM_BW_UTIL: x->value = r->dram; break;
        case GPM_GRAPHICS_UTIL: x->value = r->util; break;
        default: x->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; x->value = 0;
        }
    }
    return NVML_SUCCESS;
}
