/* Charts drawn with cairo: the Gantt timeline of a simulated run (gpumux sim --timeline) and
 * grouped bar charts of benchmark tables (gpumux bench --plot). SVG or PNG by the file name. */
#include "chart.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpumux/workload.h"

#define W 1400.0
#define LEFT 170.0
#define RIGHT 20.0
#define TOP 56.0
#define ROW 58.0
#define AXIS 44.0
#define LEGEND 34.0

/* Colours (RGB) of what a row shows. */
static const double C_KERNEL[3] = {0.23, 0.44, 0.71}, C_H2D[3] = {0.20, 0.63, 0.17},
		    C_D2H[3] = {0.96, 0.50, 0.05}, C_MEMSET[3] = {0.09, 0.75, 0.81},
		    C_STALL[3] = {0.84, 0.15, 0.16}, C_WAIT[3] = {0.70, 0.70, 0.70},
		    C_MIG_IN[3] = {0.10, 0.45, 0.10}, C_MIG_OUT[3] = {0.58, 0.40, 0.74},
		    C_TURN[3] = {0.25, 0.25, 0.32};
/* Series colours of bar charts. */
static const double C_TASK[8][3] = {{0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17},
				    {0.84, 0.15, 0.16}, {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29},
				    {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50}};

static int is_svg(const char *path)
{
	size_t n = strlen(path);
	return n >= 4 && !strcmp(path + n - 4, ".svg");
}

static int is_png(const char *path)
{
	size_t n = strlen(path);
	return n >= 4 && !strcmp(path + n - 4, ".png");
}

/* A surface for path (by its extension) of w x h; NULL with the reason in err. */
static cairo_surface_t *open_surface(const char *path, double w, double h, char *err, size_t err_len)
{
	cairo_surface_t *sf = NULL;
	if (is_svg(path))
		sf = cairo_svg_surface_create(path, w, h);
	else if (is_png(path))
		sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)w, (int)h);
	else {
		snprintf(err, err_len, "%s: expected a file name ending in .svg or .png", path);
		return NULL;
	}
	if (cairo_surface_status(sf) != CAIRO_STATUS_SUCCESS) {
		snprintf(err, err_len, "%s: %s", path, cairo_status_to_string(cairo_surface_status(sf)));
		cairo_surface_destroy(sf);
		return NULL;
	}
	return sf;
}

/* Finishes the drawing: writes the PNG, flushes the SVG. 0 or -EIO with the reason. */
static int close_surface(cairo_t *cr, cairo_surface_t *sf, const char *path, char *err, size_t err_len)
{
	int rc = 0;
	cairo_status_t st = cairo_status(cr);
	cairo_destroy(cr);
	if (st == CAIRO_STATUS_SUCCESS && is_png(path))
		st = cairo_surface_write_to_png(sf, path);
	cairo_surface_finish(sf);
	if (st == CAIRO_STATUS_SUCCESS)
		st = cairo_surface_status(sf);
	if (st != CAIRO_STATUS_SUCCESS) {
		snprintf(err, err_len, "%s: %s", path, cairo_status_to_string(st));
		rc = -EIO;
	}
	cairo_surface_destroy(sf);
	return rc;
}

static void text(cairo_t *cr, double x, double y, double size, int bold, const char *s)
{
	cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
			       bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
	cairo_set_font_size(cr, size);
	cairo_move_to(cr, x, y);
	cairo_show_text(cr, s);
}

static double text_width(cairo_t *cr, double size, const char *s)
{
	cairo_text_extents_t e;
	cairo_set_font_size(cr, size);
	cairo_text_extents(cr, s, &e);
	return e.x_advance;
}

/* A "nice" tick step (1, 2 or 5 x 10^k) giving about n ticks over span. */
static double nice_step(double span, int n)
{
	double raw = span / n, p = pow(10, floor(log10(raw))), m = raw / p;
	return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

/* ---- the timeline ---- */

/* Bands of a row: where in the row, and which spans go there. */
enum { B_TURN, B_MAIN, B_WAIT, B_MIG_IN, B_MIG_OUT, B_COUNT };
static const double band_y[B_COUNT][2] = {{4, 8}, {10, 28}, {31, 36}, {38, 43}, {45, 50}};

static int band_of(int kind)
{
	switch (kind) {
	case GMX_OP_KERNEL:
	case GMX_OP_COPY_H2D:
	case GMX_OP_COPY_D2H:
	case GMX_OP_MEMSET:
	case GMX_SPAN_STALL:
		return B_MAIN;
	case GMX_SPAN_WAIT:
		return B_WAIT;
	case GMX_SPAN_MIG_IN:
		return B_MIG_IN;
	case GMX_SPAN_MIG_OUT:
		return B_MIG_OUT;
	default:
		return -1;
	}
}

static const double *colour_of(int kind)
{
	switch (kind) {
	case GMX_OP_COPY_H2D:
		return C_H2D;
	case GMX_OP_COPY_D2H:
		return C_D2H;
	case GMX_OP_MEMSET:
		return C_MEMSET;
	case GMX_SPAN_STALL:
		return C_STALL;
	case GMX_SPAN_WAIT:
		return C_WAIT;
	case GMX_SPAN_MIG_IN:
		return C_MIG_IN;
	case GMX_SPAN_MIG_OUT:
		return C_MIG_OUT;
	default:
		return C_KERNEL;
	}
}

/* Draw order within a row: stalls over the kernels they sit in. */
static int layer(int kind)
{
	return kind == GMX_SPAN_STALL ? 1 : 0;
}

static int cmp_span(const void *a, const void *b)
{
	const gmx_sim_span_t *x = a, *y = b;
	if (x->task != y->task)
		return x->task < y->task ? -1 : 1;
	if (layer(x->kind) != layer(y->kind))
		return layer(x->kind) - layer(y->kind);
	if (x->kind != y->kind)
		return x->kind - y->kind;
	return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

static int cmp_start(const void *a, const void *b)
{
	const gmx_sim_span_t *x = a, *y = b;
	return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* Rectangles merged at pixel resolution: a run of spans closer than half a pixel is one. */
typedef struct {
	cairo_t *cr;
	double x0, x1, y0, y1;
	const double *rgb;
	int open;
} run_t;

static void run_flush(run_t *r)
{
	if (!r->open)
		return;
	double w = r->x1 - r->x0 < 0.6 ? 0.6 : r->x1 - r->x0; /* the shortest still shows */
	cairo_set_source_rgb(r->cr, r->rgb[0], r->rgb[1], r->rgb[2]);
	cairo_rectangle(r->cr, r->x0, r->y0, w, r->y1 - r->y0);
	cairo_fill(r->cr);
	r->open = 0;
}

static void run_add(run_t *r, double x0, double x1, double y0, double y1, const double *rgb)
{
	if (r->open && rgb == r->rgb && y0 == r->y0 && x0 <= r->x1 + 0.5) {
		if (x1 > r->x1)
			r->x1 = x1;
		return;
	}
	run_flush(r);
	*r = (run_t){r->cr, x0, x1, y0, y1, rgb, 1};
}

int gmx_chart_timeline(const char *path, const gmx_sim_timeline_t *tl, const gmx_chart_task_t *tasks,
		       uint32_t n_tasks, int64_t from_ns, int64_t to_ns, const char *title, char *err,
		       size_t err_len)
{
	if (to_ns <= from_ns || !n_tasks) {
		snprintf(err, err_len, "%s: nothing to draw (an empty window or no tasks)", path);
		return -EINVAL;
	}
	/* The spans in the window, sorted by row, layer, kind and start. */
	gmx_sim_span_t *sp = malloc((tl->n ? tl->n : 1) * sizeof *sp),
		       *kern = malloc((tl->n ? tl->n : 1) * sizeof *kern);
	if (!sp || !kern) {
		free(sp);
		free(kern);
		snprintf(err, err_len, "out of memory for the timeline");
		return -ENOMEM;
	}
	uint64_t n = 0, nk = 0;
	for (uint64_t i = 0; i < tl->n; i++) {
		const gmx_sim_span_t *s = &tl->spans[i];
		if (s->end_ns < from_ns || s->start_ns > to_ns || s->task >= n_tasks || band_of(s->kind) < 0)
			continue;
		sp[n++] = *s;
		if (s->kind == GMX_OP_KERNEL)
			kern[nk++] = *s;
	}
	qsort(sp, n, sizeof *sp, cmp_span);
	qsort(kern, nk, sizeof *kern, cmp_start);

	double h = TOP + ROW * n_tasks + AXIS + LEGEND;
	cairo_surface_t *sf = open_surface(path, W, h, err, err_len);
	if (!sf) {
		free(sp);
		free(kern);
		return -EIO;
	}
	cairo_t *cr = cairo_create(sf);
	cairo_set_source_rgb(cr, 1, 1, 1);
	cairo_paint(cr);
	double span_ns = (double)(to_ns - from_ns), plot_w = W - LEFT - RIGHT;
#define X(t) (LEFT + ((double)(t) - (double)from_ns) / span_ns * plot_w)
	cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
	text(cr, 12, 24, 16, 1, title);
	/* Rows: labels and alternating backgrounds. */
	for (uint32_t t = 0; t < n_tasks; t++) {
		double y = TOP + ROW * t;
		cairo_set_source_rgb(cr, t % 2 ? 0.97 : 0.93, t % 2 ? 0.97 : 0.93, t % 2 ? 0.97 : 0.95);
		cairo_rectangle(cr, LEFT, y, plot_w, ROW);
		cairo_fill(cr);
		char lab[96];
		snprintf(lab, sizeof lab, "%.20s", tasks[t].name);
		cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
		text(cr, 12, y + 24, 13, 1, lab);
		snprintf(lab, sizeof lab, "priority %d", tasks[t].priority);
		cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
		text(cr, 12, y + 41, 11, 0, lab);
	}
	/* Clip the bars to the plot. */
	cairo_save(cr);
	cairo_rectangle(cr, LEFT, TOP, plot_w, ROW * n_tasks);
	cairo_clip(cr);
	/* Turns: who had the execution engine, from its first kernel until another task's kernel
	 * starts (idle time in between included: under time slicing, its slice). */
	run_t r = {.cr = cr};
	for (uint64_t i = 0; i < nk;) {
		uint32_t t = kern[i].task;
		int64_t a = kern[i].start_ns, b = kern[i].end_ns;
		uint64_t j = i + 1;
		for (; j < nk && kern[j].task == t; j++)
			if (kern[j].end_ns > b)
				b = kern[j].end_ns;
		if (j < nk && kern[j].start_ns > a) /* its turn lasts until another task's kernel starts */
			b = kern[j].start_ns;
		double y = TOP + ROW * t;
		run_add(&r, X(a), X(b), y + band_y[B_TURN][0], y + band_y[B_TURN][1], C_TURN);
		i = j;
	}
	run_flush(&r);
	for (uint64_t i = 0; i < n; i++) {
		const gmx_sim_span_t *s = &sp[i];
		int b = band_of(s->kind);
		double y = TOP + ROW * s->task;
		run_add(&r, X(s->start_ns), X(s->end_ns), y + band_y[b][0], y + band_y[b][1],
			colour_of(s->kind));
	}
	run_flush(&r);
	cairo_restore(cr);
	/* The time axis, in ms from the window's start. */
	double axis_y = TOP + ROW * n_tasks;
	cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
	cairo_set_line_width(cr, 1);
	cairo_move_to(cr, LEFT, axis_y + 0.5);
	cairo_line_to(cr, LEFT + plot_w, axis_y + 0.5);
	cairo_stroke(cr);
	double ms = span_ns / 1e6, step = nice_step(ms, 10);
	for (double v = 0; v <= ms + 1e-9; v += step) {
		double x = LEFT + v / ms * plot_w;
		cairo_move_to(cr, floor(x) + 0.5, axis_y);
		cairo_line_to(cr, floor(x) + 0.5, axis_y + 6);
		cairo_stroke(cr);
		char lab[32];
		snprintf(lab, sizeof lab, "%g", (from_ns / 1e6) + v);
		text(cr, x - text_width(cr, 11, lab) / 2, axis_y + 19, 11, 0, lab);
	}
	text(cr, LEFT + plot_w / 2 - 60, axis_y + 36, 12, 0, "simulated time (ms)");
	/* Legend. */
	static const struct {
		const double *rgb;
		const char *what;
	} leg[] = {{C_KERNEL, "kernel"},
		   {C_H2D, "copy in"},
		   {C_D2H, "copy out"},
		   {C_STALL, "waiting for its pages"},
		   {C_WAIT, "issued, not started"},
		   {C_MIG_IN, "memory migrated in"},
		   {C_MIG_OUT, "memory evicted"},
		   {C_TURN, "its turn on the GPU (top band)"}};
	double lx = LEFT, ly = axis_y + AXIS + 12;
	for (size_t i = 0; i < sizeof leg / sizeof leg[0]; i++) {
		cairo_set_source_rgb(cr, leg[i].rgb[0], leg[i].rgb[1], leg[i].rgb[2]);
		cairo_rectangle(cr, lx, ly - 9, 14, 10);
		cairo_fill(cr);
		cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
		text(cr, lx + 18, ly, 11, 0, leg[i].what);
		lx += 18 + text_width(cr, 11, leg[i].what) + 22;
	}
#undef X
	free(sp);
	free(kern);
	return close_surface(cr, sf, path, err, err_len);
}

/* ---- bar charts ---- */

/* Horizontal grid lines every `step` up to vmax between x0 and x1, their values, and the
 * y axis's label turned upright beside them. */
static void y_axis(cairo_t *cr, double x0, double x1, double top, double ph, double vmax, double step,
		   const char *label)
{
	for (double v = 0; v <= vmax + 1e-12; v += step) {
		double y = floor(top + ph - v / vmax * ph) + 0.5;
		cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
		cairo_move_to(cr, x0, y);
		cairo_line_to(cr, x1, y);
		cairo_stroke(cr);
		char lab[32];
		snprintf(lab, sizeof lab, "%g", v);
		cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
		text(cr, x0 - 8 - text_width(cr, 11, lab), y + 4, 11, 0, lab);
	}
	cairo_save(cr);
	cairo_translate(cr, 22, top + ph / 2 + text_width(cr, 12, label) / 2);
	cairo_rotate(cr, -M_PI / 2);
	text(cr, 0, 0, 12, 0, label);
	cairo_restore(cr);
}

int gmx_chart_bars(const char *path, const char *title, const char *y_label, const char *const *groups,
		   uint32_t n_groups, const char *const *series, uint32_t n_series, const double *values,
		   double ref, char *err, size_t err_len)
{
	if (!n_groups || !n_series) {
		snprintf(err, err_len, "%s: nothing to draw", path);
		return -EINVAL;
	}
	/* Group labels run down-right at 30 degrees from each group's centre: measure them first. */
	cairo_surface_t *scratch = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
	cairo_t *m = cairo_create(scratch);
	cairo_select_font_face(m, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
	double lmax = 0, llast = 0;
	for (uint32_t g = 0; g < n_groups; g++) {
		llast = text_width(m, 11, groups[g]);
		if (llast > lmax)
			lmax = llast;
	}
	cairo_destroy(m);
	cairo_surface_destroy(scratch);
	double left = 90, top = 76, gw = 50.0 + 20.0 * n_series;
	double w = left + gw * n_groups + 30;
	if (w < 760)
		w = 760;
	gw = (w - left - 30) / n_groups;
	double right = llast * 0.866 - gw / 2 + 16 > 30 ? llast * 0.866 - gw / 2 + 16 : 30;
	w = left + gw * n_groups + right;
	double bottom = 24 + lmax * 0.5 + 8, h = top + 300 + bottom;
	cairo_surface_t *sf = open_surface(path, w, h, err, err_len);
	if (!sf)
		return -EIO;
	cairo_t *cr = cairo_create(sf);
	cairo_set_source_rgb(cr, 1, 1, 1);
	cairo_paint(cr);
	double vmax = ref > 0 ? ref : 0;
	for (uint32_t i = 0; i < n_groups * n_series; i++)
		if (isfinite(values[i]) && values[i] > vmax)
			vmax = values[i];
	if (vmax <= 0)
		vmax = 1;
	double step = nice_step(vmax, 6);
	vmax = ceil(vmax / step) * step;
	double ph = h - top - bottom;
	cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
	text(cr, 12, 24, 16, 1, title);
	cairo_set_line_width(cr, 1);
	y_axis(cr, left, w - right, top, ph, vmax, step, y_label);
	for (uint32_t g = 0; g < n_groups; g++) {
		double gx = left + gw * g, bw = (gw - 24) / n_series;
		for (uint32_t k = 0; k < n_series; k++) {
			double v = values[g * n_series + k];
			if (!isfinite(v) || v < 0)
				continue;
			double bh = v / vmax * ph;
			cairo_set_source_rgb(cr, C_TASK[k % 8][0], C_TASK[k % 8][1], C_TASK[k % 8][2]);
			cairo_rectangle(cr, gx + 12 + bw * k, top + ph - bh, bw - 2, bh);
			cairo_fill(cr);
		}
		cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
		cairo_save(cr);
		cairo_translate(cr, gx + gw / 2 - 4, top + ph + 12);
		cairo_rotate(cr, M_PI / 6);
		text(cr, 0, 0, 11, 0, groups[g]);
		cairo_restore(cr);
	}
	if (ref > 0) { /* a reference line, e.g. 1.0 = alone */
		double y = floor(top + ph - ref / vmax * ph) + 0.5;
		cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
		double dash[] = {5, 4};
		cairo_set_dash(cr, dash, 2, 0);
		cairo_move_to(cr, left, y);
		cairo_line_to(cr, w - right, y);
		cairo_stroke(cr);
		cairo_set_dash(cr, NULL, 0, 0);
	}
	double lx = left, ly = 50;
	for (uint32_t k = 0; k < n_series; k++) {
		cairo_set_source_rgb(cr, C_TASK[k % 8][0], C_TASK[k % 8][1], C_TASK[k % 8][2]);
		cairo_rectangle(cr, lx, ly - 9, 14, 10);
		cairo_fill(cr);
		cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
		text(cr, lx + 18, ly, 11, 0, series[k]);
		lx += 18 + text_width(cr, 11, series[k]) + 22;
	}
	return close_surface(cr, sf, path, err, err_len);
}

int gmx_chart_points(const char *path, const char *title, const char *x_label, const char *y_label,
		     const char *const *labels, uint32_t n, const double *x, const double *y, const double *series,
		     char *err, size_t err_len)
{
	if (!n) {
		snprintf(err, err_len, "%s: nothing to draw", path);
		return -EINVAL;
	}
	double w = 760, h = 480, left = 90, top = 60, right = 30, bottom = 56;
	cairo_surface_t *sf = open_surface(path, w, h, err, err_len);
	if (!sf)
		return -EIO;
	cairo_t *cr = cairo_create(sf);
	cairo_set_source_rgb(cr, 1, 1, 1);
	cairo_paint(cr);
	double xmax = 0, ymax = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (isfinite(x[i]) && x[i] > xmax)
			xmax = x[i];
		if (isfinite(y[i]) && y[i] > ymax)
			ymax = y[i];
	}
	xmax = xmax > 0 ? xmax : 1;
	ymax = ymax > 0 ? ymax : 1;
	double xs = nice_step(xmax, 6), ys = nice_step(ymax, 6);
	xmax = ceil(xmax / xs) * xs;
	ymax = ceil(ymax / ys) * ys;
	double pw = w - left - right, ph = h - top - bottom;
	cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
	text(cr, 12, 24, 16, 1, title);
	cairo_set_line_width(cr, 1);
	y_axis(cr, left, left + pw, top, ph, ymax, ys, y_label);
	for (double v = 0; v <= xmax + 1e-12; v += xs) {
		double xx = floor(left + v / xmax * pw) + 0.5;
		cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
		cairo_move_to(cr, xx, top);
		cairo_line_to(cr, xx, top + ph);
		cairo_stroke(cr);
		char lab[32];
		snprintf(lab, sizeof lab, "%g", v);
		cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
		text(cr, xx - text_width(cr, 11, lab) / 2, top + ph + 16, 11, 0, lab);
	}
	cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
	text(cr, left + pw / 2 - text_width(cr, 12, x_label) / 2, h - 14, 12, 0, x_label);
	for (uint32_t i = 0; i < n; i++) {
		if (!isfinite(x[i]) || !isfinite(y[i]))
			continue;
		int k = series ? (int)series[i] : (int)i;
		double px = left + x[i] / xmax * pw, py = top + ph - y[i] / ymax * ph;
		cairo_set_source_rgb(cr, C_TASK[k % 8][0], C_TASK[k % 8][1], C_TASK[k % 8][2]);
		cairo_arc(cr, px, py, 5, 0, 2 * M_PI);
		cairo_fill(cr);
		cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
		text(cr, px + 8, py - 6, 10, 0, labels[i]);
	}
	return close_surface(cr, sf, path, err, err_len);
}
