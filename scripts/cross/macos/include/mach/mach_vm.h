/* The one declaration of <mach/mach_vm.h> that a dependency (the
 * Prometheus client's process collector) needs, for building without the
 * macOS SDK; the function is in libSystem. */
#ifndef PROSODY_MACH_VM_H
#define PROSODY_MACH_VM_H
#include <mach/mach_types.h>
#include <mach/vm_region.h>
kern_return_t mach_vm_region(vm_map_t target_task, mach_vm_address_t *address, mach_vm_size_t *size,
                             vm_region_flavor_t flavor, vm_region_info_t info, mach_msg_type_number_t *infoCnt,
                             mach_port_t *object_name);
#endif
